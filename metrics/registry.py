"""The metric registry: one :class:`MetricDefinition` per metric, the only place a metric is described.

A definition holds everything about one metric: the per-item value its extremes and PROC order by
(an :class:`ItemValueDefinition`, shared between metrics that rank by the same value), the assembly
of its cumulative per-cutoff values from the closed forms in :mod:`steadyrank.metrics.formulas`,
when it is NA, whether a lower value is better (PROC then takes the smallest achievable value), its
constants and its row in the table of docs/ARCHITECTURE.md "Metric definitions"
(:func:`markdown_table` renders that table; a test keeps the document in step).

The engine (:mod:`steadyrank.metrics.engine`) looks definitions up by name; adding a metric means
adding one definition here and its brute-force reference in ``tests/metrics/reference.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np

from steadyrank.metrics.formulas import (
    expected_average_precision,
    expected_err,
    expected_hit,
    expected_positional,
    expected_reciprocal_rank,
    log_discounts,
)
from steadyrank.metrics.layout import Layout, largest_sorted
from steadyrank.metrics.novelty import SOURCE_LABEL, novelty_extreme, novelty_gain, novelty_ideal, novelty_values
from steadyrank.metrics.udcg import DISTRACTION_LABEL, UTILITY_LABEL, expected_udcg, udcg_score
from steadyrank.metrics.values import Items, ItemValue, Transform, gather, running_sum

if TYPE_CHECKING:
    from steadyrank.metrics.engine import ItemContext

#: (items, layout, K) → cumulative values (Q, K) at cutoffs 1..K, before the NA mask.
Assembly = Callable[["ItemContext", Layout, int], np.ndarray]
#: (items, K) → bool, broadcastable to (Q, K): True where the metric is defined.
Definedness = Callable[["ItemContext", int], np.ndarray]
#: (items, tie-aware layout, best?) → the max (best) or min over tie orders (Q, K), for metrics whose
#: extremes are not the layout sorted by one item value.
Extreme = Callable[["ItemContext", Layout, bool], np.ndarray]


@dataclass(frozen=True)
class ItemValueDefinition:
    """A per-item value, built per batch from the item context (``rel_level``, ``gmax``, pools)."""

    key: str
    doc: str
    build: Callable[[ItemContext], Transform]


@dataclass(frozen=True)
class MetricDefinition:
    """Everything about one metric: item value, assembly, NA rule, direction, constants, doc row."""

    name: str
    item: ItemValueDefinition
    assemble: Assembly
    defined: Definedness
    formula: str
    na_when: str
    lower_is_better: bool = False
    constants: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    labels: tuple[str, ...] = ()  # item labels the metric reads (Batch.labels), beyond the grades
    extreme: Extreme | None = None


def _positive(grades: np.ndarray) -> np.ndarray:
    return np.maximum(grades, 0)


def _cutoffs(kmax: int) -> np.ndarray:
    return np.arange(1, kmax + 1)[None, :]


# --- RA-nWG constants and pool quantities ----------------------------------------------------------

#: RA-nWG base utilities b_g on the 1–5 rubric (b2 = b1 = 0).
RARITY_BASE = MappingProxyType({5: 1.0, 4: 0.5, 3: 0.1})
#: RA-nWG weights when the judged pool has no grade-5 item.
RARITY_FALLBACK = MappingProxyType({5: 1.0, 4: 1.0, 3: 0.2})


def pool_counts(items: ItemContext) -> dict[int, np.ndarray]:
    """n_g: judged items with rubric grade g (5, 4, 3) per query, float64 (Q,)."""

    def compute() -> dict[int, np.ndarray]:
        pool = items.judged_rubric
        return {g: (pool == g).sum(axis=1).astype(np.float64) for g in (5, 4, 3)}

    return items.cached("pool_counts", compute)


def rarity_weights(items: ItemContext) -> dict[int, np.ndarray]:
    """RA-nWG weights per query: r_g = b_g / p_g^α, w5 = 1, w4 = min(r4/r5, cap4), w3 = min(r3/r5, cap3).

    With p_g = n_g / N, r_g / r_5 = (b_g / b_5) · (n_5 / n_g)^α; no grade-5 item gives (1, 1, 0.2).
    α, cap4 and cap3 come from :class:`~steadyrank.metrics.params.MetricParams` (1, 1.0, 0.25).
    """

    def compute() -> dict[int, np.ndarray]:
        params = items.params
        caps = {4: params.rarity_cap4, 3: params.rarity_cap3}
        counts = pool_counts(items)
        n5 = counts[5]
        weights = {5: np.ones_like(n5)}
        with np.errstate(divide="ignore", invalid="ignore"):
            for g in (4, 3):
                n_g = counts[g]
                ratio = np.where(n_g > 0, RARITY_BASE[g] / RARITY_BASE[5] * (n5 / n_g) ** params.rarity_alpha, 0.0)
                weights[g] = np.where(n5 > 0, np.minimum(ratio, caps[g]), RARITY_FALLBACK[g])
        return weights

    return items.cached("rarity_weights", compute)


def rarity_ideal(items: ItemContext, kmax: int) -> np.ndarray:
    """Sum of the k largest pool weights for k = 1..K: (Q, K) (RA-nWG's denominator)."""

    def compute() -> np.ndarray:
        grades = (5, 4, 3)
        weights, counts = rarity_weights(items), pool_counts(items)
        w = np.stack([weights[g] for g in grades], axis=1)
        n = np.stack([counts[g] * (weights[g] > 0) for g in grades], axis=1)
        order = np.argsort(-w, axis=1, kind="stable")
        w, n = gather(w, order), gather(n, order)
        ks = _cutoffs(kmax)
        total, taken = np.zeros((w.shape[0], kmax)), np.zeros((w.shape[0], kmax))
        for j in range(len(grades)):
            take = np.minimum(np.maximum(ks - taken, 0), n[:, j : j + 1])
            total += take * w[:, j : j + 1]
            taken += take
        return total

    return items.cached(("rarity_ideal", kmax), compute)


def ideal_dcg(items: ItemContext, exponential: bool, kmax: int) -> np.ndarray:
    """IDCG@k for k = 1..K from every judged grade of the query (gain g or 2^g − 1): (Q, K)."""

    def compute() -> np.ndarray:
        judged = np.fmax(items.judged, 0.0)  # NaN pads give 0
        gains = 2.0**judged - 1 if exponential else judged
        best = np.zeros((gains.shape[0], kmax))
        if gains.shape[1]:
            top = largest_sorted(gains, kmax)
            best[:, : top.shape[1]] = top
        return running_sum(best * log_discounts(kmax)[None, :])

    return items.cached(("ideal_dcg", exponential, kmax), compute)


# --- Item values ------------------------------------------------------------------------------------


def rarity_transform(items: ItemContext) -> Transform:
    """The RA-nWG weight of an item's rubric grade (0 for grades 1–2 and anything else)."""
    weights = rarity_weights(items)

    def rarity(items: Items) -> np.ndarray:
        out = np.zeros(items.rubric.shape)
        for grade, w in weights.items():
            out = np.where(items.rubric == grade, w[:, None], out)
        return out

    return rarity


RELEVANT = ItemValueDefinition(
    "relevant", "1 if grade ≥ rel_level else 0", lambda c: lambda items, t=c.rel_level: items.grade >= t
)
GAIN_LINEAR = ItemValueDefinition("gain_linear", "max(grade, 0)", lambda c: lambda items: _positive(items.grade))
GAIN_EXPONENTIAL = ItemValueDefinition(
    "gain_exponential", "2^max(grade, 0) − 1", lambda c: lambda items: 2.0 ** _positive(items.grade) - 1
)
ERR_PROBABILITY = ItemValueDefinition(
    "err_probability",
    "R = (2^max(grade, 0) − 1) / 2^gmax",
    lambda c: lambda items, scale=2.0**c.gmax: (2.0 ** _positive(items.grade) - 1) / scale,
)
RARITY_WEIGHT = ItemValueDefinition("rarity_weight", "RA-nWG weight w_g of the rubric grade", rarity_transform)
RUBRIC_4PLUS = ItemValueDefinition("rubric_4plus", "1 if rubric ≥ 4 else 0", lambda c: lambda items: items.rubric >= 4)
RUBRIC_5 = ItemValueDefinition("rubric_5", "1 if rubric = 5 else 0", lambda c: lambda items: items.rubric >= 5)
RUBRIC_HARMFUL = ItemValueDefinition(
    "rubric_harmful", "1 if rubric ≤ 2 else 0", lambda c: lambda items: items.rubric <= 2
)
UDCG_SCORE = ItemValueDefinition(
    "udcg_score", "s = utility if grade ≥ rel_level else −λ·distraction",
    lambda c: lambda items, t=c.rel_level, weight=c.params.udcg_distraction: udcg_score(
        items.grade >= t, items.extra(UTILITY_LABEL), items.extra(DISTRACTION_LABEL), weight),
)


def _novelty_transform(items: ItemContext) -> Transform:
    rarity, beta = rarity_transform(items), items.params.novelty_beta
    return lambda it: novelty_values(rarity(it), it.extra(SOURCE_LABEL), beta)


NOVELTY_VALUE = ItemValueDefinition(
    "novelty_value", "v = w for the heaviest item of each source in the pool, β·w for the others",
    _novelty_transform,
)


# --- NA rules ---------------------------------------------------------------------------------------


def _always(items: ItemContext, kmax: int) -> np.ndarray:
    return np.ones((1, 1), dtype=bool)


def _has_relevant(items: ItemContext, kmax: int) -> np.ndarray:
    return items.n_relevant[:, None] > 0


def _ndcg_defined(exponential: bool) -> Definedness:
    return lambda items, kmax: _has_relevant(items, kmax) & (ideal_dcg(items, exponential, kmax) > 0)


def _nrecall_denominator(items: ItemContext, grades: tuple[int, ...], kmax: int) -> np.ndarray:
    counts = pool_counts(items)
    pool = np.sum([counts[g] for g in grades], axis=0)
    return np.minimum(_cutoffs(kmax), pool[:, None])


# --- Assemblies -------------------------------------------------------------------------------------


def _hits(items: ItemContext, layout: Layout, kmax: int) -> np.ndarray:
    return expected_positional(layout, items.item(RELEVANT))


def _per_cutoff(item: ItemValueDefinition) -> Assembly:
    """E[#(item in top k)] / k."""
    return lambda items, layout, kmax: expected_positional(layout, items.item(item)) / _cutoffs(kmax)


def _ndcg(exponential: bool) -> Assembly:
    gain = GAIN_EXPONENTIAL if exponential else GAIN_LINEAR

    def assemble(items: ItemContext, layout: Layout, kmax: int) -> np.ndarray:
        dcg = expected_positional(layout, items.item(gain), log_discounts(kmax))
        return dcg / ideal_dcg(items, exponential, kmax)

    return assemble


def _err(items: ItemContext, layout: Layout, kmax: int) -> np.ndarray:
    judged = items.judged
    positive = np.unique(judged[judged > 0])  # candidates' grades come from the qrels
    classes: list[tuple[float, ItemValue]] = [
        (float((2.0**g - 1) / 2.0**items.gmax), items.value(lambda it, grade=g: it.grade == grade)) for g in positive
    ]
    return expected_err(layout, items.item(ERR_PROBABILITY), classes)


def _ra_nwg(items: ItemContext, layout: Layout, kmax: int) -> np.ndarray:
    return expected_positional(layout, items.item(RARITY_WEIGHT)) / rarity_ideal(items, kmax)


def _ra_nwg_novelty(items: ItemContext, layout: Layout, kmax: int) -> np.ndarray:
    gain = novelty_gain(layout, items.item(RARITY_WEIGHT), items.params.novelty_beta)
    return gain / novelty_ideal(items, kmax)


def _nrecall(item: ItemValueDefinition, grades: tuple[int, ...]) -> Assembly:
    return lambda items, layout, kmax: (
        expected_positional(layout, items.item(item)) / _nrecall_denominator(items, grades, kmax)
    )


_RARITY_CONSTANTS = MappingProxyType({"base": RARITY_BASE, "fallback": RARITY_FALLBACK,
                                      "parameters": ("rarity_alpha", "rarity_cap4", "rarity_cap3")})

_DEFINITIONS = (
    MetricDefinition("hits", RELEVANT, _hits, _always, "#relevant in top k", "never"),
    MetricDefinition(
        "recall", RELEVANT, lambda c, layout, k: _hits(c, layout, k) / c.n_relevant[:, None], _has_relevant,
        "hits / N+", "N+ = 0",
    ),
    MetricDefinition(
        "precision", RELEVANT, lambda c, layout, k: _hits(c, layout, k) / _cutoffs(k), _always, "hits / k", "never"
    ),
    MetricDefinition(
        "f1", RELEVANT, lambda c, layout, k: 2 * _hits(c, layout, k) / (_cutoffs(k) + c.n_relevant[:, None]),
        _always, "2·hits / (k + N+)", "never",
    ),
    MetricDefinition(
        "ndcg", GAIN_LINEAR, _ndcg(False), _ndcg_defined(False),
        "DCG@k / IDCG@k, gain = grade (trec_eval `ndcg_cut`)", "N+ = 0 or IDCG@k = 0",
    ),
    MetricDefinition(
        "ndcg_exp", GAIN_EXPONENTIAL, _ndcg(True), _ndcg_defined(True),
        "DCG@k / IDCG@k, gain = 2^grade − 1", "N+ = 0 or IDCG@k = 0",
    ),
    MetricDefinition(
        "mrr", RELEVANT, lambda c, layout, k: expected_reciprocal_rank(layout, c.item(RELEVANT)), _has_relevant,
        "1 / rank of the first relevant item in top k (RR@k; 0 if none)", "N+ = 0",
    ),
    MetricDefinition(
        "map", RELEVANT,
        lambda c, layout, k: expected_average_precision(layout, c.item(RELEVANT), c.n_relevant), _has_relevant,
        "Σ_{relevant in top k} precision@rank / N+ (trec_eval `map_cut`)", "N+ = 0",
    ),
    MetricDefinition(
        "err", ERR_PROBABILITY, _err, _has_relevant,
        "Σ_{r≤k} (1/r) R_r Π_{i<r}(1 − R_i), R = (2^g − 1) / 2^gmax", "N+ = 0",
    ),
    MetricDefinition(
        "ra_nwg", RARITY_WEIGHT, _ra_nwg, lambda c, k: rarity_ideal(c, k) > 0,
        "Σ_{top k} w / (sum of the k largest w in the judged pool)", "that denominator = 0",
        constants=_RARITY_CONSTANTS,
    ),
    MetricDefinition(
        "nrecall4", RUBRIC_4PLUS, _nrecall(RUBRIC_4PLUS, (4, 5)), lambda c, k: _nrecall_denominator(c, (4, 5), k) > 0,
        "#(rubric ≥ 4 in top k) / min(k, n4 + n5)", "n4 + n5 = 0",
    ),
    MetricDefinition(
        "nrecall5", RUBRIC_5, _nrecall(RUBRIC_5, (5,)), lambda c, k: _nrecall_denominator(c, (5,), k) > 0,
        "#(rubric = 5 in top k) / min(k, n5)", "n5 = 0",
    ),
    MetricDefinition(
        "precision4", RUBRIC_4PLUS, _per_cutoff(RUBRIC_4PLUS), _always, "#(rubric ≥ 4 in top k) / k", "never"
    ),
    MetricDefinition(
        "harm", RUBRIC_HARMFUL, _per_cutoff(RUBRIC_HARMFUL), _always, "#(rubric ≤ 2 in top k) / k", "never",
        lower_is_better=True,
    ),
    MetricDefinition(
        "hit", RELEVANT, lambda c, layout, k: expected_hit(layout, c.item(RELEVANT), c.n_relevant), _has_relevant,
        "1 if the top k holds every relevant judged document (hits ≥ N+) else 0 (Hit@K)", "N+ = 0",
    ),
    MetricDefinition(
        "ra_nwg_novelty", NOVELTY_VALUE, _ra_nwg_novelty, lambda c, k: novelty_ideal(c, k) > 0,
        "Σ_{r ≤ k} w·δ / (largest such sum of k judged items); δ = 1 for the first positive-weight item of a "
        "source or facet, β for a repeat", "that denominator = 0",
        constants=MappingProxyType({"parameters": ("novelty_beta", "rarity_alpha", "rarity_cap4", "rarity_cap3")}),
        labels=(SOURCE_LABEL,), extreme=novelty_extreme,
    ),
    MetricDefinition(
        "udcg", UDCG_SCORE, lambda c, layout, k: expected_udcg(layout, c.item(UDCG_SCORE)), _always,
        "σ((1/k) Σ_{r ≤ k} s_r), s = utility if relevant else −λ·distraction (UDCG)", "never",
        constants=MappingProxyType({"parameters": ("udcg_distraction",)}),
        labels=(UTILITY_LABEL, DISTRACTION_LABEL),
    ),
)

#: Every metric by name, in documentation order.
METRICS: Mapping[str, MetricDefinition] = MappingProxyType({d.name: d for d in _DEFINITIONS})


def metric_definition(name: str) -> MetricDefinition:
    """The definition of metric ``name``; KeyError names the known metrics."""
    try:
        return METRICS[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r}; known metrics: {', '.join(sorted(METRICS))}") from None


def markdown_table() -> str:
    """The metric table of docs/ARCHITECTURE.md "Metric definitions", one row per definition."""
    rows = ["| name | value at cutoff k | orders ties by (item value) | NA when |", "|---|---|---|---|"]
    for d in METRICS.values():
        direction = " (lower is better)" if d.lower_is_better else ""
        rows.append(f"| `{d.name}` | {d.formula}{direction} | `{d.item.key}`: {d.item.doc} | {d.na_when} |")
    return "\n".join(rows)

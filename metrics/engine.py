"""The batch engine: tie-aware statistics of many measures over a padded batch of queries.

Input is a :class:`Batch` (scores, grades and judged pools as padded numpy arrays). For every
measure it returns per-query arrays of the expected value over tie orders, the min and max (each
tie group sorted by the metric's item value ascending / descending), the tie-oblivious value on
one fixed order, and PROC (the metric of the best ordering of the whole candidate pool). NA
entries are NaN.

Cost: one ``argpartition`` at the largest cutoff K shared by all measures and cutoffs, one
O(M + K log K) order per (item value, direction) for the boundary group of size M, and O(K)
closed forms; nothing sorts a whole candidate list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from steadyrank.metrics.formulas import (
    expected_average_precision,
    expected_err,
    expected_positional,
    expected_reciprocal_rank,
    log_discounts,
)
from steadyrank.metrics.layout import Layout, PartialSort, best_order, compact_columns, smallest_sorted
from steadyrank.metrics.values import GradeGrid, ItemValue, gather
from steadyrank.metrics.measures import LOWER_IS_BETTER, Measure

TieBreak = Literal["input", "docid"]
STATS = ("expected", "min", "max", "oblivious", "proc")

#: RA-nWG base utilities b_g on the 1–5 rubric (b2 = b1 = 0).
RARITY_BASE = {5: 1.0, 4: 0.5, 3: 0.1}
#: RA-nWG weight caps relative to grade 5, and the fallback weights when no grade-5 item exists.
RARITY_CAP = {4: 1.0, 3: 0.25}
RARITY_FALLBACK = {5: 1.0, 4: 1.0, 3: 0.2}


@dataclass
class Batch:
    """Padded arrays for Q queries (pads: score ``-inf``, grades 0, judged grades NaN).

    ``scores`` may be float32 or float64 (compared exactly as given). ``grades``/``rubric`` are the
    candidates' grades (unjudged = 0 / the rubric grade for unjudged); ``judged``/``judged_rubric``
    hold every judged grade of each query from the qrels (pool for N+, IDCG and RA-nWG).
    ``docid_rank`` orders candidates by docid descending (0 = largest docid), needed only for
    ``tie_break="docid"``. ``valid`` marks real candidates (derived from the scores if omitted).
    """

    scores: np.ndarray  # (Q, W) float
    grades: np.ndarray  # (Q, W) numeric (int or float)
    rubric: np.ndarray  # (Q, W) numeric
    judged: np.ndarray  # (Q, J) float64, NaN padded
    judged_rubric: np.ndarray  # (Q, J) float64, NaN padded
    docid_rank: np.ndarray | None = None  # (Q, W) int
    valid: np.ndarray | None = None  # (Q, W) bool

    def __post_init__(self) -> None:
        if self.valid is None:
            self.valid = np.isfinite(self.scores)

    def padded_to(self, width: int) -> "Batch":
        """The same batch with at least ``width`` columns."""
        extra = width - self.scores.shape[1]
        if extra <= 0:
            return self

        def pad(a: np.ndarray, value: float) -> np.ndarray:
            return np.pad(a, ((0, 0), (0, extra)), constant_values=value)

        rank = None if self.docid_rank is None else pad(self.docid_rank, np.iinfo(np.int64).max)
        rubric = pad(self.rubric, 0)
        return Batch(pad(self.scores, -np.inf), pad(self.grades, 0), rubric, self.judged, self.judged_rubric,
                     rank, pad(self.valid, False))


def _positive(grades: np.ndarray) -> np.ndarray:
    return np.clip(grades, 0, None)


class _ItemValues:
    """The per-item values of a batch (lazy :class:`ItemValue` per metric key) and per-query pools."""

    def __init__(self, batch: Batch, rel_level: float, gmax: float) -> None:
        self.batch, self.rel_level, self.gmax = batch, rel_level, gmax
        self._cache: dict[object, object] = {}
        self.n_relevant = (batch.judged >= rel_level).sum(axis=1).astype(np.float64)
        pool = batch.judged_rubric
        self.pool_counts = {g: (pool == g).sum(axis=1).astype(np.float64) for g in (5, 4, 3)}
        self.rarity_weights = self._rarity_weights()
        # A superset of the items with a non-zero value under any metric key (judged ones).
        nonzero = batch.grades != 0
        if batch.rubric is not batch.grades:
            nonzero |= batch.rubric >= 3
        if rel_level <= 0:
            nonzero |= (batch.grades >= rel_level) & batch.valid
        self.nonzero_mask = nonzero
        self.nonzero_cols = compact_columns(nonzero)
        self.grid = GradeGrid(batch.grades, batch.rubric, batch.valid)

    def value(self, transform) -> ItemValue:
        return ItemValue(self.grid, transform)

    def __getitem__(self, key: str) -> ItemValue:
        if key not in self._cache:
            self._cache[key] = self.value(self._transform(key))
        return self._cache[key]

    def _transform(self, key: str):
        rel_level, scale = self.rel_level, 2.0**self.gmax
        if key == "relevant":
            return lambda g, r, v: (g >= rel_level) & v
        if key == "gain_linear":
            return lambda g, r, v: _positive(g)
        if key == "gain_exponential":
            return lambda g, r, v: 2.0 ** _positive(g) - 1
        if key == "err_probability":
            return lambda g, r, v: (2.0 ** _positive(g) - 1) / scale
        if key == "rarity_weight":
            weights = self.rarity_weights

            def rarity(g: np.ndarray, r: np.ndarray, v: np.ndarray) -> np.ndarray:
                out = np.zeros(r.shape)
                for grade, w in weights.items():
                    out = np.where(r == grade, w[:, None], out)
                return out

            return rarity
        if key == "rubric_4plus":
            return lambda g, r, v: (r >= 4) & v
        if key == "rubric_5":
            return lambda g, r, v: (r >= 5) & v
        if key == "rubric_harmful":
            return lambda g, r, v: (r <= 2) & v
        raise KeyError(key)

    def _rarity_weights(self) -> dict[int, np.ndarray]:
        """RA-nWG weights per query: r_g = b_g / p_g (α = 1), w4 = min(r4/r5, 1), w3 = min(r3/r5, .25).

        With p_g = n_g / N, r_g / r_5 = (b_g / b_5) · n_5 / n_g; no grade-5 item gives (1, 1, 0.2).
        """
        n5 = self.pool_counts[5]
        weights = {5: np.ones_like(n5)}
        with np.errstate(divide="ignore", invalid="ignore"):
            for g in (4, 3):
                n_g = self.pool_counts[g]
                ratio = np.where(n_g > 0, RARITY_BASE[g] / RARITY_BASE[5] * n5 / n_g, 0.0)
                weights[g] = np.where(n5 > 0, np.minimum(ratio, RARITY_CAP[g]), RARITY_FALLBACK[g])
        return weights

    def rarity_ideal(self, kmax: int) -> np.ndarray:
        if ("rarity_ideal", kmax) not in self._cache:
            self._cache[("rarity_ideal", kmax)] = self._rarity_ideal(kmax)
        return self._cache[("rarity_ideal", kmax)]

    def _rarity_ideal(self, kmax: int) -> np.ndarray:
        """Sum of the k largest pool weights for k = 1..K: (Q, K) (RA-nWG's denominator)."""
        grades = (5, 4, 3)
        w = np.stack([self.rarity_weights[g] for g in grades], axis=1)
        n = np.stack([self.pool_counts[g] * (self.rarity_weights[g] > 0) for g in grades], axis=1)
        order = np.argsort(-w, axis=1, kind="stable")
        w, n = gather(w, order), gather(n, order)
        ks = np.arange(1, kmax + 1)[None, :]
        total, taken = np.zeros((w.shape[0], kmax)), np.zeros((w.shape[0], kmax))
        for j in range(len(grades)):
            take = np.clip(ks - taken, 0, n[:, j : j + 1])
            total += take * w[:, j : j + 1]
            taken += take
        return total

    def ideal_dcg(self, gain: str, kmax: int) -> np.ndarray:
        if ("ideal_dcg", gain, kmax) not in self._cache:
            self._cache[("ideal_dcg", gain, kmax)] = self._ideal_dcg(gain, kmax)
        return self._cache[("ideal_dcg", gain, kmax)]

    def _ideal_dcg(self, gain: str, kmax: int) -> np.ndarray:
        """IDCG@k for k = 1..K from every judged grade of the query: (Q, K)."""
        judged = np.nan_to_num(np.clip(self.batch.judged, 0, None), nan=0.0)
        gains = judged if gain == "gain_linear" else 2.0**judged - 1
        best = np.zeros((gains.shape[0], kmax))
        if gains.shape[1]:
            top = gather(gains, smallest_sorted(-gains, kmax))
            best[:, : top.shape[1]] = top
        return np.cumsum(best * log_discounts(kmax)[None, :], axis=1)


def _cumulative(name: str, layout: Layout, values: _ItemValues, kmax: int) -> np.ndarray:
    """The metric's cumulative per-cutoff values on ``layout``: (Q, K), NaN where NA."""
    ks = np.arange(1, kmax + 1)[None, :]
    n_rel = values.n_relevant[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        na_no_relevant = np.where(n_rel > 0, 1.0, np.nan)
        if name in ("hits", "recall", "precision", "f1"):
            hits = expected_positional(layout, values["relevant"])
            return {"hits": hits, "recall": hits / n_rel * na_no_relevant,
                    "precision": hits / ks, "f1": 2 * hits / (ks + n_rel)}[name]
        if name in ("ndcg", "ndcg_exp"):
            key = "gain_linear" if name == "ndcg" else "gain_exponential"
            dcg = expected_positional(layout, values[key], log_discounts(kmax))
            ideal = values.ideal_dcg(key, kmax)
            return np.where(ideal > 0, dcg / ideal, np.nan) * na_no_relevant
        if name == "mrr":
            return expected_reciprocal_rank(layout, values["relevant"]) * na_no_relevant
        if name == "map":
            return expected_average_precision(layout, values["relevant"], values.n_relevant) * na_no_relevant
        if name == "err":
            judged = values.batch.judged
            positive = np.unique(judged[judged > 0])  # candidates' grades come from the qrels
            classes = [(float((2.0**g - 1) / 2.0**values.gmax), values.value(lambda g, r, v, grade=g: g == grade))
                       for g in positive]
            return expected_err(layout, values["err_probability"], classes) * na_no_relevant
        if name == "ra_nwg":
            ideal = values.rarity_ideal(kmax)
            return np.where(ideal > 0, expected_positional(layout, values["rarity_weight"]) / ideal, np.nan)
        if name in ("nrecall4", "nrecall5"):
            key, pool = ("rubric_4plus", values.pool_counts[4] + values.pool_counts[5]) if name == "nrecall4" \
                else ("rubric_5", values.pool_counts[5])
            denominator = np.minimum(ks, pool[:, None])
            return np.where(denominator > 0, expected_positional(layout, values[key]) / denominator, np.nan)
        if name in ("precision4", "harm"):
            return expected_positional(layout, values[Measure(name, 1).key]) / ks
    raise ValueError(f"unknown metric {name!r}")


def evaluate_batch(
    batch: Batch,
    measures: list[Measure],
    *,
    rel_level: float = 1,
    gmax: float | None = None,
    tie_break: TieBreak = "input",
) -> dict[Measure, dict[str, np.ndarray]]:
    """Per-query statistics of every measure: ``{measure: {stat: (Q,) array}}``, stat in STATS."""
    if tie_break not in ("input", "docid"):
        raise ValueError(f"tie_break must be 'input' or 'docid', got {tie_break!r}")
    if tie_break == "docid" and batch.docid_rank is None:
        raise ValueError("tie_break='docid' needs docid ranks in the batch")
    kmax = max(m.k for m in measures)
    batch = batch.padded_to(kmax)
    largest_grade = float(np.nanmax(batch.judged, initial=0.0))  # candidates' grades come from the qrels
    if gmax is None:
        gmax = largest_grade
    elif gmax < largest_grade:
        raise ValueError(f"gmax {gmax:g} is below the largest grade {largest_grade:g} in the data")
    values = _ItemValues(batch, rel_level, gmax)

    partial = PartialSort.of(batch.scores, kmax)
    if tie_break == "input":
        oblivious_order = partial.fixed_order()
    else:
        oblivious_order = partial.fixed_order(lambda cols: gather(batch.docid_rank, cols))
    layouts: dict[str, Layout] = {
        "expected": Layout.tied(partial, oblivious_order),
        "oblivious": Layout.fixed(oblivious_order),
    }
    ordered: dict[tuple[str, bool, str], Layout] = {}

    def layout_for(stat: str, measure: Measure) -> Layout:
        if stat in layouts:
            return layouts[stat]
        descending = stat == "max" or (stat == "proc" and measure.name not in LOWER_IS_BETTER)
        cache_key = (stat if stat == "proc" else "extreme", descending, measure.key)
        if cache_key not in ordered:
            item = values[measure.key]
            if stat == "proc":
                order = best_order(item, values.nonzero_cols, values.nonzero_mask, kmax, descending)
            else:
                order = partial.fixed_order((lambda cols: -item.at(cols)) if descending else item.at)
            ordered[cache_key] = Layout.fixed(order)
        return ordered[cache_key]

    results: dict[Measure, dict[str, np.ndarray]] = {}
    by_name: dict[str, list[Measure]] = {}
    for measure in measures:
        by_name.setdefault(measure.name, []).append(measure)
    for name, group in by_name.items():
        per_stat = {stat: _cumulative(name, layout_for(stat, group[0]), values, kmax) for stat in STATS}
        for measure in group:
            results[measure] = {stat: per_stat[stat][:, measure.k - 1] for stat in STATS}
    return results

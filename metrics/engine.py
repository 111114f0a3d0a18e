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

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from metrics.formulas import (
    expected_average_precision,
    expected_err,
    expected_positional,
    expected_reciprocal_rank,
    log_discounts,
)
from metrics.layout import Layout, PartialSort, best_order, smallest_sorted
from metrics.measures import LOWER_IS_BETTER, Measure

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

    ``grades``/``rubric`` are the candidates' grades (unjudged = 0 / the rubric grade for
    unjudged); ``judged``/``judged_rubric`` hold every judged grade of each query from the qrels
    (pool for N+, IDCG and RA-nWG). ``docid_rank`` orders candidates by docid descending
    (0 = largest docid), needed only for ``tie_break="docid"``.
    """

    scores: np.ndarray  # (Q, W) float64
    grades: np.ndarray  # (Q, W) float64
    rubric: np.ndarray  # (Q, W) float64
    judged: np.ndarray  # (Q, J) float64, NaN padded
    judged_rubric: np.ndarray  # (Q, J) float64, NaN padded
    valid: np.ndarray = field(init=False)  # (Q, W) bool
    docid_rank: np.ndarray | None = None  # (Q, W) int

    def __post_init__(self) -> None:
        self.valid = np.isfinite(self.scores)

    def padded_to(self, width: int) -> "Batch":
        """The same batch with at least ``width`` columns."""
        extra = width - self.scores.shape[1]
        if extra <= 0:
            return self

        def pad(a: np.ndarray, value: float) -> np.ndarray:
            return np.pad(a, ((0, 0), (0, extra)), constant_values=value)

        rank = None if self.docid_rank is None else pad(self.docid_rank, np.iinfo(np.int64).max)
        return Batch(pad(self.scores, -np.inf), pad(self.grades, 0), pad(self.rubric, 0),
                     self.judged, self.judged_rubric, rank)


class _ItemValues:
    """Per-item values of a batch (Q, W), one array per metric key, built on first use."""

    def __init__(self, batch: Batch, rel_level: float, gmax: float) -> None:
        self.batch, self.rel_level, self.gmax = batch, rel_level, gmax
        self._cache: dict[object, np.ndarray] = {}
        valid = batch.valid
        self.n_relevant = (batch.judged >= rel_level).sum(axis=1).astype(np.float64)
        pool = batch.judged_rubric
        self.pool_counts = {g: (pool == g).sum(axis=1).astype(np.float64) for g in (5, 4, 3)}
        self.pool_size = np.isfinite(pool).sum(axis=1).astype(np.float64)
        self.rarity_weights = self._rarity_weights()
        self._builders = {
            "relevant": lambda: ((batch.grades >= rel_level) & valid).astype(np.float64),
            "gain_linear": lambda: np.clip(batch.grades, 0, None) * valid,
            "gain_exponential": lambda: (2.0 ** np.clip(batch.grades, 0, None) - 1) * valid,
            "err_probability": lambda: (2.0 ** np.clip(batch.grades, 0, None) - 1) / 2.0**gmax * valid,
            "rarity_weight": self._rarity_item_weights,
            "rubric_4plus": lambda: ((batch.rubric >= 4) & valid).astype(np.float64),
            "rubric_5": lambda: ((batch.rubric >= 5) & valid).astype(np.float64),
            "rubric_harmful": lambda: ((batch.rubric <= 2) & valid).astype(np.float64),
        }

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._cache:
            self._cache[key] = self._builders[key]()
        return self._cache[key]

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

    def _rarity_item_weights(self) -> np.ndarray:
        rubric = self.batch.rubric
        out = np.zeros(rubric.shape)
        for g, w in self.rarity_weights.items():
            out = np.where(rubric == g, w[:, None], out)
        return out * self.batch.valid

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
        w, n = np.take_along_axis(w, order, axis=1), np.take_along_axis(n, order, axis=1)
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
            top = np.take_along_axis(gains, smallest_sorted(-gains, kmax), axis=1)
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
            grades = values.batch.grades
            positive = np.unique(grades[(grades > 0) & values.batch.valid])
            classes = [(float((2.0**g - 1) / 2.0**values.gmax), ((grades == g) & values.batch.valid).astype(np.float64))
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
    largest_grade = float(np.nanmax(np.concatenate([batch.judged.ravel(), batch.grades.ravel()]), initial=0.0))
    if gmax is None:
        gmax = largest_grade
    elif gmax < largest_grade:
        raise ValueError(f"gmax {gmax:g} is below the largest grade {largest_grade:g} in the data")
    values = _ItemValues(batch, rel_level, gmax)

    partial = PartialSort.of(batch.scores, kmax)
    oblivious_order = partial.fixed_order(None if tie_break == "input" else batch.docid_rank)
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
                order = best_order(item, batch.valid, kmax, descending)
            else:
                order = partial.fixed_order(item, descending)
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

"""Tie statistics and rank correlation of one regime's keys, averaged over queries.

For a query with keys ``s`` sorted descending and cutoff k (``k' = min(k, n)``):

- ``unique_at_k`` = number of distinct values among the top k' keys;
- ``mean_tie_group_size_at_k`` = mean full size |G| of the tie groups with a member in the top k'
  (singletons count as size 1, so 1.0 means no ties reach the top k);
- ``spearman_vs_fp32`` = Pearson correlation of the average ranks of ``s`` and of the FP32 keys.

Queries with fewer than 2 candidates are skipped (``spearman`` also skips constant keys).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from steadyrank.metrics import tie_groups

TIE_KS = (1, 3, 5, 10, 20, 50, 100)


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n of ``values`` ascending, tied values sharing their mean rank."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(values.size)
    sorted_values = values[order]
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1], True])
    for begin, end in zip(starts[:-1], starts[1:], strict=False):
        ranks[order[begin:end]] = (begin + end + 1) / 2.0
    return ranks


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's ρ with average ranks for ties; NaN when either side is constant."""
    ra, rb = _average_ranks(np.asarray(a, np.float64)), _average_ranks(np.asarray(b, np.float64))
    ra -= ra.mean()
    rb -= rb.mean()
    denominator = np.sqrt((ra * ra).sum() * (rb * rb).sum())
    return float((ra * rb).sum() / denominator) if denominator > 0 else float("nan")


def _mean(values: list[float]) -> float | None:
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else None


def tie_statistics(keys: Mapping[str, np.ndarray], ks: Sequence[int] = TIE_KS) -> dict[str, dict[str, float | None]]:
    """``{"unique_at_k": {"10": mean}, "mean_tie_group_size_at_k": {"10": mean}}`` over queries."""
    unique: dict[int, list[float]] = {k: [] for k in ks}
    size: dict[int, list[float]] = {k: [] for k in ks}
    for values in keys.values():
        if values.size < 2:
            continue
        groups = tie_groups(values)
        starts = np.cumsum([0] + [g.size for g in groups])
        for k in ks:
            reached = [g.size for g, start in zip(groups, starts, strict=False) if start < min(k, values.size)]
            unique[k].append(len(reached))
            size[k].append(float(np.mean(reached)))
    return {
        "unique_at_k": {str(k): _mean(unique[k]) for k in ks},
        "mean_tie_group_size_at_k": {str(k): _mean(size[k]) for k in ks},
    }


def mean_spearman(keys: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray]) -> float | None:
    """Mean over queries of :func:`spearman` between ``keys`` and the reference keys."""
    return _mean([spearman(keys[q], reference[q]) for q in keys if keys[q].size >= 2])

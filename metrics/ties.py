"""Tie groups: maximal runs of *exactly equal* scores after sorting by score descending.

Scores are compared exactly as given. Upcasting BF16/FP16/FP32 values to float64 is exact, so
callers may pass any float dtype (a torch BF16 tensor as ``t.float().numpy()``): two scores tie
here iff they were equal in the dtype the model emitted.
"""

from __future__ import annotations

import numpy as np


def as_scores(scores: np.typing.ArrayLike) -> np.ndarray:
    """Return ``scores`` as a 1-D float64 array (exact for every float dtype of ≤ 64 bits).

    Raises ValueError on NaN or ±inf, which have no place in a ranking.
    """
    values = np.asarray(scores)
    if values.ndim != 1:
        raise ValueError(f"scores must be one-dimensional, got shape {values.shape}")
    values = values.astype(np.float64, copy=False)
    if not np.all(np.isfinite(values)):
        bad = int(np.flatnonzero(~np.isfinite(values))[0])
        raise ValueError(f"score at index {bad} is {values[bad]}: scores must be finite")
    return values


def rank_order(scores: np.typing.ArrayLike) -> np.ndarray:
    """Indices sorted by score descending, ties broken by input index ascending (a stable sort)."""
    values = as_scores(scores)
    return np.argsort(-values, kind="stable")


def tie_groups(scores: np.typing.ArrayLike, min_size: int = 1) -> list[np.ndarray]:
    """The tie groups in rank order, each an ascending array of input indices.

    ``min_size=2`` keeps only real ties (groups of two or more equal scores).
    """
    values = as_scores(scores)
    order = np.argsort(-values, kind="stable")
    if order.size == 0:
        return []
    sorted_values = values[order]
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    groups = np.split(order, starts[1:])
    return [g for g in groups if g.size >= min_size]


def straddling_group(scores: np.typing.ArrayLike, k: int) -> np.ndarray | None:
    """The tie group that crosses cutoff ``k`` (members both inside and outside the top k), if any.

    Such a group makes every top-k metric depend on an arbitrary tie order.
    """
    if k < 1:
        raise ValueError(f"cutoff k must be >= 1, got {k}")
    start = 0
    for group in tie_groups(scores):
        end = start + group.size
        if start < k < end:
            return group
        if end >= k:
            return None
        start = end
    return None

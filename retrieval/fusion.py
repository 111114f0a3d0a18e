"""Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009), with optional weights.

``RRF(d) = Σ_i w_i / (k + rank_i(d))`` over the input lists i that contain d, ``rank_i`` 1-based,
``k = 60`` by default, ``w_i = 1`` by default. A document absent from a list gets nothing from it.
Output is sorted by RRF descending; equal RRF values keep first-appearance order (list 0 first,
then list 1, …, each in rank order) — the values themselves stay tied, as they truly are.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

import numpy as np

DEFAULT_RRF_K = 60.0

T = TypeVar("T", bound=Hashable)


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[T]],
    *,
    k: float = DEFAULT_RRF_K,
    weights: Sequence[float] | None = None,
    limit: int | None = None,
) -> tuple[list[T], np.ndarray]:
    """Fuse ranked lists of ids: ``(ids, rrf_scores float64)`` best first, at most ``limit`` of them."""
    if k < 0:
        raise ValueError(f"RRF k must be ≥ 0, got {k}")
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} ranked lists")
    fused: dict[T, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        if len(set(ranking)) != len(ranking):
            raise ValueError("a ranked list holds the same id twice")
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + weight / (k + rank)
    ids = list(fused)
    scores = np.fromiter(fused.values(), dtype=np.float64, count=len(ids))
    order = np.argsort(-scores, kind="stable")[:limit]
    return [ids[i] for i in order], scores[order]

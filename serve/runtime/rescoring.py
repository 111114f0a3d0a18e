"""Boundary re-scoring: settle a tie group that straddles the requested ``top_n`` with FP32 scores.

After HPS, a group of *exactly equal* rank keys can still cross the cutoff (the low-precision logits
themselves were equal). Only that group is re-run with the forward pass in FP32; its members are
then ordered by those FP32 keys (ties by input index) inside the positions the group already held.
Every other position of the ranking is left as it was, and the cost is proportional to the tie.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from steadyrank.metrics import rank_order, straddling_group


@dataclass(frozen=True)
class BoundaryResolution:
    """The final order, how many candidates were re-scored, and whether a tie still crosses top_n."""

    order: np.ndarray
    rescored: int
    tie_at_cutoff: bool


def resolve_boundary(
    keys: np.ndarray, top_n: int | None, rescore: Callable[[np.ndarray], np.ndarray] | None
) -> BoundaryResolution:
    """Rank ``keys`` (descending, ties by input index) and settle a tie straddling ``top_n``.

    ``rescore(indices)`` returns FP32 rank keys for those input indices; ``None`` disables
    re-scoring (the straddling tie is then reported in ``tie_at_cutoff``).
    """
    order = rank_order(keys)
    if top_n is None or top_n >= order.size:
        return BoundaryResolution(order, 0, False)
    group = straddling_group(keys, top_n)
    if group is None:
        return BoundaryResolution(order, 0, False)
    if rescore is None:
        return BoundaryResolution(order, 0, True)
    fine = np.asarray(rescore(group), dtype=np.float64)
    by_fine = np.argsort(-fine, kind="stable")  # group is ascending, so ties keep input order
    start = int(np.flatnonzero(order == group[0])[0])
    order = order.copy()
    order[start : start + group.size] = group[by_fine]
    inside = top_n - start  # members of the group that land in the top n
    sorted_fine = fine[by_fine]
    return BoundaryResolution(order, int(group.size), bool(sorted_fine[inside - 1] == sorted_fine[inside]))

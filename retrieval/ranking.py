"""The served order of reranked candidates: the one ranking rule and the one boundary-tie resolution.

Ranking rule: rank keys descending (HPS: the FP32 logit or logit margin, never the probability — a
saturating sigmoid ties what the keys order), equal keys by input index (retrieval order).

Boundary re-scoring: after HPS a group of *exactly equal* rank keys can still cross the requested
``top_n`` (the low-precision logits themselves were equal). Only that group is re-run with the
forward pass in FP32; its members are then ordered by those FP32 keys (ties by input index) inside
the positions the group already held. Every other position is left as it was, and the cost is
proportional to the tie (docs/ARCHITECTURE.md, "Ranking").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

from steadyrank.metrics import rank_order, straddling_group, tie_groups

#: FP32 rank keys of the candidates at the given input indices.
Rescore = Callable[[np.ndarray], np.ndarray]
AsyncRescore = Callable[[np.ndarray], Awaitable[np.ndarray]]


@dataclass(frozen=True)
class Ranking:
    """The served order of one reranked list and its tie facts.

    ``order``: input indices by rank. ``tie_groups``: groups (≥ 2) of exactly equal keys, in rank
    order. ``tie_at_cutoff``: a tie still straddles ``top_n``. ``tie_group_size_at_cutoff``: size of
    the group that straddled ``top_n`` before re-scoring (0 when none). ``rescored``: candidates
    re-run in FP32.
    """

    order: np.ndarray
    tie_groups: list[np.ndarray]
    tie_at_cutoff: bool
    tie_group_size_at_cutoff: int
    rescored: int


def rank(keys: np.ndarray, top_n: int | None, rescore: Rescore | None) -> Ranking:
    """Rank ``keys`` (descending, ties by input index) and settle a tie straddling ``top_n``.

    ``rescore(indices)`` returns FP32 rank keys for those input indices; ``None`` disables
    re-scoring (the straddling tie is then reported in ``tie_at_cutoff``).
    """
    keys = np.asarray(keys)
    order = rank_order(keys)
    groups = tie_groups(keys, min_size=2)
    group = straddling_group(keys, top_n) if top_n is not None and top_n < order.size else None
    if group is None or top_n is None:
        return Ranking(order, groups, False, 0, 0)
    if rescore is None:
        return Ranking(order, groups, True, int(group.size), 0)
    fine = np.asarray(rescore(group), dtype=np.float64)
    by_fine = np.argsort(-fine, kind="stable")  # group is ascending, so ties keep input order
    start = int(np.flatnonzero(order == group[0])[0])
    order = np.copy(order)
    order[start : start + group.size] = group[by_fine]
    inside = top_n - start  # members of the group that land in the top n
    sorted_fine = fine[by_fine]
    still_tied = bool(sorted_fine[inside - 1] == sorted_fine[inside])
    return Ranking(order, groups, still_tied, int(group.size), int(group.size))


async def rank_async(keys: np.ndarray, top_n: int | None, rescore: AsyncRescore | None) -> Ranking:
    """:func:`rank` with an awaitable ``rescore`` (a model replica's FP32 pass), called only for a
    tie that straddles ``top_n``."""
    keys = np.asarray(keys)
    group = straddling_group(keys, top_n) if top_n is not None and top_n < keys.size else None
    if group is None or rescore is None:
        return rank(keys, top_n, None)
    fine = await rescore(group)
    return rank(keys, top_n, lambda _: fine)

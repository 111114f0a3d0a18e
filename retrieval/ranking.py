"""The served order of reranked candidates: the one ranking rule and the one boundary-tie resolution.

Ranking rule: rank keys descending (HPS: the FP32 logit or logit margin, never the probability — a
saturating sigmoid ties what the keys order), equal keys by input index (retrieval order).

Boundary re-scoring: after HPS a group of *exactly equal* rank keys can still cross the requested
``top_n`` (the low-precision logits themselves were equal). Only that group is re-run with the
forward pass in FP32; its members are then ordered by those FP32 keys (ties by input index) inside
the positions the group already held. Every other position is left as it was, and the cost is
proportional to the tie (docs/ARCHITECTURE.md, "Ranking").

Certified cutoffs (:class:`Cutoff`): exact ties are the zero-width case of a wider risk. If every
low-precision key is within ``ε`` (``Cutoff.margin``, rank-key units) of its FP32 key, two candidates
whose low-precision keys differ by more than ``2ε`` keep their FP32 order. With ``s`` the keys sorted
descending and ``n = top_n``, the candidates that may cross the cutoff are those in ranked positions
``p < n`` with ``s[p] ≤ s[n] + 2ε`` and ``p ≥ n`` with ``s[p] ≥ s[n−1] − 2ε``: one contiguous block
of positions around the cutoff (it holds any exact tie that straddles it). Only that block is re-run
in FP32 and ordered by those keys (ties by input index) inside its positions; the top ``n`` *set* is
then FP32's (every candidate left out of the block is more than ``2ε`` from every candidate on the
other side of the cutoff, so its side is the same in FP32). The block's size is known before any
re-score: a block larger than ``Cutoff.max_rescore`` is not re-scored (only an exact straddling tie
is, as without certification) and the cutoff is reported uncertified.
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
class Cutoff:
    """Certified cutoffs: ``margin`` ε ≥ 0, the bound on |low-precision key − FP32 key| of one
    candidate (rank-key units); ``max_rescore``, the most candidates one ranking may re-run in FP32
    to certify its cutoff (a larger block is left uncertified, before any work)."""

    margin: float
    max_rescore: int

    def __post_init__(self) -> None:
        if not self.margin >= 0.0:  # NaN too
            raise ValueError(f"a cutoff margin must be >= 0, got {self.margin}")
        if self.max_rescore < 0:
            raise ValueError(f"max_rescore must be >= 0, got {self.max_rescore}")


@dataclass(frozen=True)
class Ranking:
    """The served order of one reranked list and its tie facts.

    ``order``: input indices by rank. ``tie_groups``: groups (≥ 2) of exactly equal keys, in rank
    order. ``tie_at_cutoff``: a tie still straddles ``top_n``. ``tie_group_size_at_cutoff``: size of
    the group that straddled ``top_n`` before re-scoring (0 when none). ``rescored``: candidates of
    that group re-run in FP32. ``near_rescored``: the other candidates re-run in FP32 to certify the
    cutoff (near, not exact, ties). ``certified``: the top ``top_n`` set is FP32's given the
    :class:`Cutoff`'s margin (None: no certification asked for).
    """

    order: np.ndarray
    tie_groups: list[np.ndarray]
    tie_at_cutoff: bool
    tie_group_size_at_cutoff: int
    rescored: int
    near_rescored: int = 0
    certified: bool | None = None


def near_cutoff(sorted_keys: np.ndarray, top_n: int, margin: float) -> tuple[int, int]:
    """``(start, stop)``: the ranked positions whose candidates may cross ``top_n`` when each key may
    be ``margin`` off its FP32 value (module docstring; ``sorted_keys`` descending, ``0 < top_n <
    len``). Empty (``start == stop == top_n``) when the keys either side are more than ``2·margin`` apart."""
    negated: np.ndarray = -np.asarray(sorted_keys, dtype=np.float64)  # ascending, as searchsorted wants
    width = 2.0 * margin
    start = int(np.count_nonzero(negated[:top_n] < negated[top_n] - width))  # inside, more than 2ε above
    stop = top_n + int(np.count_nonzero(negated[top_n:] <= negated[top_n - 1] + width))  # outside, within 2ε
    if start == top_n or stop == top_n:
        return top_n, top_n
    return start, stop


def rank(keys: np.ndarray, top_n: int | None, rescore: Rescore | None, cutoff: Cutoff | None = None) -> Ranking:
    """Rank ``keys`` (descending, ties by input index) and settle a tie straddling ``top_n``.

    ``rescore(indices)`` returns FP32 rank keys for those input indices; ``None`` disables
    re-scoring (the straddling tie is then reported in ``tie_at_cutoff``). ``cutoff``: certify the
    top ``top_n`` set (module docstring); None: exact ties only.
    """
    keys = np.asarray(keys)
    order = rank_order(keys)
    groups = tie_groups(keys, min_size=2)
    cut = top_n is not None and top_n < order.size
    if cutoff is not None and (top_n is None or not cut):  # every candidate served: no cutoff to cross
        return Ranking(order, groups, False, 0, 0, 0, True)
    if cutoff is not None and top_n is not None:
        start, stop = near_cutoff(keys[order], top_n, cutoff.margin)
        if stop == start:  # nothing within 2ε of the cutoff: FP32's set as it stands
            return Ranking(order, groups, False, 0, 0, 0, True)
        if rescore is not None and stop - start <= cutoff.max_rescore:
            return _certify(keys, order, groups, top_n, start, stop, rescore)
    group = straddling_group(keys, top_n) if top_n is not None and cut else None
    certified = None if cutoff is None else False
    if group is None or top_n is None:
        return Ranking(order, groups, False, 0, 0, 0, certified)
    if rescore is None:
        return Ranking(order, groups, True, int(group.size), 0, 0, certified)
    start = int(np.flatnonzero(order == group[0])[0])
    order, still_tied = _reorder(order, start, start + group.size, top_n, rescore)
    return Ranking(order, groups, still_tied, int(group.size), int(group.size), 0, certified)


def _reorder(order: np.ndarray, start: int, stop: int, top_n: int, rescore: Rescore) -> tuple[np.ndarray, bool]:
    """``order`` with positions ``[start, stop)`` (around ``top_n``) ordered by their FP32 keys, ties by
    input index, and whether an FP32 tie still straddles ``top_n``."""
    members = np.sort(order[start:stop])  # ascending input index: a stable sort keeps ties in input order
    fine = np.asarray(rescore(members), dtype=np.float64)
    by_fine = np.argsort(-fine, kind="stable")
    order = np.copy(order)
    order[start:stop] = members[by_fine]
    inside = top_n - start  # members of the block that land in the top n
    sorted_fine = fine[by_fine]
    return order, bool(sorted_fine[inside - 1] == sorted_fine[inside])


def _certify(keys: np.ndarray, order: np.ndarray, groups: list[np.ndarray], top_n: int, start: int, stop: int,
             rescore: Rescore) -> Ranking:
    """The ranking with the (non-empty) block ``[start, stop)`` of :func:`near_cutoff` re-scored in FP32."""
    group = straddling_group(keys, top_n)  # inside the block: its keys are the cutoff's two keys
    group_size = 0 if group is None else int(group.size)
    order, still_tied = _reorder(order, start, stop, top_n, rescore)
    return Ranking(order, groups, still_tied, group_size, group_size, stop - start - group_size, True)


def _to_rescore(keys: np.ndarray, top_n: int | None, cutoff: Cutoff | None) -> np.ndarray | None:
    """The input indices :func:`rank` would re-score (None: none)."""
    if top_n is None or top_n >= keys.size:
        return None
    if cutoff is not None:
        order = rank_order(keys)
        start, stop = near_cutoff(keys[order], top_n, cutoff.margin)
        if stop - start <= cutoff.max_rescore:
            return np.sort(order[start:stop]) if stop > start else None
    return straddling_group(keys, top_n)


async def rank_async(keys: np.ndarray, top_n: int | None, rescore: AsyncRescore | None,
                     cutoff: Cutoff | None = None) -> Ranking:
    """:func:`rank` with an awaitable ``rescore`` (a model replica's FP32 pass), called only for the
    candidates :func:`rank` re-scores (a straddling tie, or the block that certifies the cutoff)."""
    keys = np.asarray(keys)
    indices = _to_rescore(keys, top_n, cutoff)
    if indices is None or rescore is None:
        return rank(keys, top_n, None, cutoff)
    fine = dict(zip(indices.tolist(), np.asarray(await rescore(indices), dtype=np.float64).tolist(), strict=True))
    return rank(keys, top_n, lambda asked: np.array([fine[int(i)] for i in asked]), cutoff)

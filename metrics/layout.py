"""Ranked top-K positions of a padded batch of queries, shared by every metric and cutoff.

A batch is a ``(Q, W)`` float64 score matrix, one row per query, padded with ``-inf`` (pads carry
value 0 in every metric). ``K`` is the largest cutoff asked for and ``W >= K``.

One partial sort (``argpartition``, O(W) per row) finds the K-th largest score ``v``. Every item
scoring above ``v`` is inside the top K and every tie group above ``v`` is complete there; the
only group that may reach past position K is the *boundary group* (score == v), whose members are
gathered once into a compact ``(Q, M)`` index matrix. A :class:`Layout` then describes, for each of
the K positions, which group it belongs to: its start ``c`` (items ranked before the group), its
end inside the slice and its full size ``|G|`` — enough for every closed form in ``formulas``.

A fixed order (tie-oblivious, best case, worst case) is a layout of singleton groups, so the same
formulas give its exact metric value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from steadyrank.metrics.values import ItemValue, gather

#: A tie-break: column indices (Q, n) → sort keys (Q, n), smaller first.
KeyAt = Callable[[np.ndarray], np.ndarray]


def smallest_sorted(keys: np.ndarray, k: int) -> np.ndarray:
    """Column indices of the ``k`` smallest keys of each row, in ascending key order.

    O(W + k log k) per row: ``argpartition`` then a sort of the k selected keys.
    """
    width: int = keys.shape[1]
    k = min(k, width)
    if k < width:
        part = np.argpartition(keys, k - 1, axis=1)[:, :k]
    else:
        part = np.tile(np.arange(width), (keys.shape[0], 1))
    order = np.argsort(gather(keys, part), axis=1, kind="stable")
    return gather(part, order)


@dataclass(frozen=True)
class PartialSort:
    """The top-K split of a batch: items above the K-th score, and the boundary group at it."""

    scores: np.ndarray  # (Q, W) float64, pads -inf
    kmax: int
    top: np.ndarray  # (Q, K) column indices of the K largest scores (unordered)
    inner: np.ndarray  # (Q, K) bool: top[.] scores strictly above the K-th largest score
    inner_count: np.ndarray  # (Q,) a = items strictly above the K-th largest score
    boundary_cols: np.ndarray  # (Q, M) column indices of the boundary group, -1 padded
    boundary_count: np.ndarray  # (Q,) |boundary group| (full, may exceed K - a)

    @classmethod
    def of(cls, scores: np.ndarray, kmax: int) -> PartialSort:
        width: int = scores.shape[1]
        if width < kmax:
            raise ValueError(f"batch width {width} is below the largest cutoff {kmax}")
        if kmax < width:
            top = np.argpartition(scores, width - kmax, axis=1)[:, width - kmax :]
        else:
            top = np.tile(np.arange(width), (scores.shape[0], 1))
        top_scores = gather(scores, top)
        kth = top_scores.min(axis=1)
        inner = top_scores > kth[:, None]
        in_boundary = scores == kth[:, None]
        boundary_cols = compact_columns(in_boundary)
        return cls(scores, kmax, top, inner, inner.sum(axis=1), boundary_cols, (boundary_cols >= 0).sum(axis=1))

    def boundary_sum(self, value: ItemValue) -> np.ndarray:
        """Σ of ``value`` over each row's full boundary group, shape (Q,)."""
        gathered = value.at(np.maximum(self.boundary_cols, 0))
        return np.where(self.boundary_cols >= 0, gathered, 0.0).sum(axis=1)

    def fixed_order(self, key_at: KeyAt | None = None) -> np.ndarray:
        """Column indices of the top K under score desc, then a tie-break: shape (Q, K).

        ``key_at`` maps columns to tie-break keys, smaller first (``-value.at`` for a metric's
        best case, ``value.at`` for its worst, trec_eval's docid rank); ``None`` keeps the input
        order. Only the inner items and the boundary group's members are read, so the cost is
        O(M + K log K) per row.
        """

        def keys_at(cols: np.ndarray) -> np.ndarray:
            return cols.astype(np.float64) if key_at is None else key_at(cols)

        top_scores = gather(self.scores, self.top)
        inner_order = np.lexsort((keys_at(self.top), -top_scores, ~self.inner), axis=1)
        inner_sorted = gather(self.top, inner_order)

        safe_cols = np.maximum(self.boundary_cols, 0)
        boundary_keys = np.where(self.boundary_cols >= 0, keys_at(safe_cols), np.inf)
        chosen = smallest_sorted(boundary_keys, self.kmax)
        boundary_sorted = gather(safe_cols, chosen)

        positions = np.arange(self.kmax)[None, :]
        a = self.inner_count[:, None]
        merged = np.concatenate([inner_sorted, boundary_sorted], axis=1)
        return gather(merged, np.where(positions < a, positions, self.kmax + positions - a))


def compact_columns(mask: np.ndarray, min_width: int = 1) -> np.ndarray:
    """The True columns of each row of ``mask``, left-aligned in a (Q, N) matrix padded with -1."""
    rows, cols = np.nonzero(mask)
    counts = np.bincount(rows, minlength=mask.shape[0])
    out = np.full((mask.shape[0], max(int(counts.max(initial=0)), min_width)), -1, dtype=np.int64)
    out[rows, np.arange(rows.size) - (np.cumsum(counts) - counts)[rows]] = cols
    return out


def best_order(value: ItemValue, candidates: np.ndarray, candidate_mask: np.ndarray, kmax: int,
               descending: bool = True) -> np.ndarray:
    """Columns of the ``kmax`` valid items with the largest (or smallest) values, sorted: (Q, K).

    This is the order of PROC (the best ordering of the whole candidate pool). For a descending
    order of non-negative values only ``candidates`` — a compact (Q, N) superset of the items
    with a non-zero value (the judged ones), -1 padded, with its (Q, W) ``candidate_mask`` —
    need sorting; the remaining positions take a column outside the superset, whose value is 0.
    """
    if not descending:
        return smallest_sorted(np.where(value.valid, value.full(), np.inf), kmax)
    safe = np.maximum(candidates, 0)
    keys = np.where(candidates >= 0, value.at(safe), -np.inf)
    order = np.argsort(-keys, axis=1, kind="stable")[:, :kmax]
    ranked = gather(candidates, order)
    if ranked.shape[1] < kmax:
        ranked = np.pad(ranked, ((0, 0), (0, kmax - ranked.shape[1])), constant_values=-1)
    width = min(candidates.shape[1] + 1, candidate_mask.shape[1])
    filler = np.argmin(candidate_mask[:, :width], axis=1)  # among N + 1 columns one is outside
    return np.where(ranked >= 0, ranked, filler[:, None])


@dataclass(frozen=True)
class Layout:
    """Group structure of the K ranked positions of each query.

    ``ranked`` lists the columns at positions 0..K-1 (any order consistent with the groups);
    position p lies in a group starting at ``start[p]`` (= c, items ranked before it) and ending
    at ``end[p]`` inside the slice, whose full size is ``size[p]`` (larger than ``end - start``
    only for the boundary group). ``boundary`` marks positions of the boundary group.
    """

    ranked: np.ndarray  # (Q, K) int
    start: np.ndarray  # (Q, K) int
    end: np.ndarray  # (Q, K) int, exclusive
    size: np.ndarray  # (Q, K) float
    partial: PartialSort | None = None
    boundary: np.ndarray | None = None  # (Q, K) bool

    @classmethod
    def fixed(cls, ranked: np.ndarray) -> Layout:
        """A fixed order: every position is its own group."""
        kmax: int = ranked.shape[1]
        positions = np.broadcast_to(np.arange(kmax), ranked.shape)
        return cls(ranked, positions, positions + 1, np.ones(ranked.shape))

    @classmethod
    def tied(cls, partial: PartialSort, ranked: np.ndarray) -> Layout:
        """The tie groups of ``ranked`` (which must be sorted by score descending)."""
        sorted_scores = gather(partial.scores, ranked)
        kmax: int = ranked.shape[1]
        positions = np.broadcast_to(np.arange(kmax), ranked.shape)
        new_group = np.ones(ranked.shape, dtype=bool)
        new_group[:, 1:] = sorted_scores[:, 1:] != sorted_scores[:, :-1]
        start = np.maximum.accumulate(np.where(new_group, positions, 0), axis=1)
        ends_here = np.ones(ranked.shape, dtype=bool)
        ends_here[:, :-1] = new_group[:, 1:]
        end = np.flip(np.minimum.accumulate(np.flip(np.where(ends_here, positions + 1, kmax), axis=1), axis=1), axis=1)
        boundary = sorted_scores == sorted_scores[:, -1:]
        size = np.where(boundary, partial.boundary_count[:, None], end - start).astype(np.float64)
        return cls(ranked, start, end, size, partial, boundary)

    def prefix_sums(self, value: ItemValue) -> np.ndarray:
        """Exclusive prefix sums of the ranked values: (Q, K + 1), entry p = Σ of positions < p."""
        ranked = value.at(self.ranked)
        out = np.zeros((ranked.shape[0], ranked.shape[1] + 1))
        np.cumsum(ranked, axis=1, out=out[:, 1:])
        return out

    def group_sums(self, value: ItemValue) -> np.ndarray:
        """Σ of ``value`` over the full group of each position: (Q, K)."""
        prefix = self.prefix_sums(value)
        sums = gather(prefix, self.end) - gather(prefix, self.start)
        if self.partial is not None and self.boundary is not None:
            sums = np.where(self.boundary, self.partial.boundary_sum(value)[:, None], sums)
        return sums

    def sum_before_group(self, value: ItemValue) -> np.ndarray:
        """Σ of ``value`` over the items ranked before each position's group: (Q, K)."""
        return gather(self.prefix_sums(value), self.start)

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

from dataclasses import dataclass

import numpy as np


def smallest_sorted(keys: np.ndarray, k: int) -> np.ndarray:
    """Column indices of the ``k`` smallest keys of each row, in ascending key order.

    O(W + k log k) per row: ``argpartition`` then a sort of the k selected keys.
    """
    width = keys.shape[1]
    k = min(k, width)
    if k < width:
        part = np.argpartition(keys, k - 1, axis=1)[:, :k]
    else:
        part = np.broadcast_to(np.arange(width), keys.shape).copy()
    order = np.argsort(np.take_along_axis(keys, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


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
    def of(cls, scores: np.ndarray, kmax: int) -> "PartialSort":
        n_queries, width = scores.shape
        if width < kmax:
            raise ValueError(f"batch width {width} is below the largest cutoff {kmax}")
        if kmax < width:
            top = np.argpartition(-scores, kmax - 1, axis=1)[:, :kmax]
        else:
            top = np.broadcast_to(np.arange(width), scores.shape).copy()
        top_scores = np.take_along_axis(scores, top, axis=1)
        kth = top_scores.min(axis=1)
        inner = top_scores > kth[:, None]
        in_boundary = scores == kth[:, None]
        rows, cols = np.nonzero(in_boundary)
        counts = np.bincount(rows, minlength=n_queries)
        offsets = np.cumsum(counts) - counts
        boundary_cols = np.full((n_queries, int(counts.max(initial=1))), -1, dtype=np.int64)
        boundary_cols[rows, np.arange(rows.size) - offsets[rows]] = cols
        return cls(scores, kmax, top, inner, inner.sum(axis=1), boundary_cols, counts)

    def boundary_sum(self, values: np.ndarray) -> np.ndarray:
        """Σ of ``values`` over each row's full boundary group, shape (Q,)."""
        gathered = np.take_along_axis(values, np.maximum(self.boundary_cols, 0), axis=1)
        return np.where(self.boundary_cols >= 0, gathered, 0.0).sum(axis=1)

    def fixed_order(self, values: np.ndarray | None = None, descending: bool = False) -> np.ndarray:
        """Column indices of the top K under score desc, then a tie-break: shape (Q, K).

        The tie-break is ``values`` (a (Q, W) key, descending or ascending: the best or worst
        case of a metric, or trec_eval's docid rank) or, with ``values=None``, the input order.
        Only the inner items and the boundary group's members are read, so the cost is
        O(M + K log K) per row.
        """

        def keys_at(cols: np.ndarray) -> np.ndarray:
            if values is None:
                return cols.astype(np.float64)
            gathered = np.take_along_axis(values, cols, axis=1)
            return -gathered if descending else gathered

        top_scores = np.take_along_axis(self.scores, self.top, axis=1)
        inner_order = np.lexsort((keys_at(self.top), -top_scores, ~self.inner), axis=1)
        inner_sorted = np.take_along_axis(self.top, inner_order, axis=1)

        safe_cols = np.maximum(self.boundary_cols, 0)
        boundary_keys = np.where(self.boundary_cols >= 0, keys_at(safe_cols), np.inf)
        chosen = smallest_sorted(boundary_keys, self.kmax)
        boundary_sorted = np.take_along_axis(safe_cols, chosen, axis=1)

        positions = np.arange(self.kmax)[None, :]
        a = self.inner_count[:, None]
        merged = np.concatenate([inner_sorted, boundary_sorted], axis=1)
        return np.take_along_axis(merged, np.where(positions < a, positions, self.kmax + positions - a), axis=1)


def best_order(values: np.ndarray, valid: np.ndarray, kmax: int, descending: bool = True) -> np.ndarray:
    """Columns of the ``kmax`` valid items with the largest (or smallest) values, sorted: (Q, K).

    This is the order of PROC (the best ordering of the whole candidate pool). For descending
    order of non-negative values only the non-zero items need sorting (they are few: the judged
    relevant ones); the remaining positions take a zero-valued column, which adds nothing.
    """
    if not descending:
        return smallest_sorted(np.where(valid, values, np.inf), kmax)
    n_queries = values.shape[0]
    positive = values > 0
    rows, cols = np.nonzero(positive)
    counts = np.bincount(rows, minlength=n_queries)
    width = int(counts.max(initial=0))
    compact = np.full((n_queries, max(width, kmax)), -1, dtype=np.int64)
    compact[rows, np.arange(rows.size) - (np.cumsum(counts) - counts)[rows]] = cols
    compact_values = np.where(compact >= 0, np.take_along_axis(values, np.maximum(compact, 0), axis=1), -np.inf)
    order = np.argsort(-compact_values, axis=1, kind="stable")[:, :kmax]
    ranked = np.take_along_axis(compact, order, axis=1)
    filler = np.argmin(positive[:, : width + 1], axis=1)  # among width + 1 columns one is not positive
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
    def fixed(cls, ranked: np.ndarray) -> "Layout":
        """A fixed order: every position is its own group."""
        positions = np.broadcast_to(np.arange(ranked.shape[1]), ranked.shape)
        return cls(ranked, positions, positions + 1, np.ones(ranked.shape))

    @classmethod
    def tied(cls, partial: PartialSort, ranked: np.ndarray) -> "Layout":
        """The tie groups of ``ranked`` (which must be sorted by score descending)."""
        sorted_scores = np.take_along_axis(partial.scores, ranked, axis=1)
        n_queries, kmax = ranked.shape
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

    def ranked_values(self, values: np.ndarray) -> np.ndarray:
        """``values`` (Q, W) read at the ranked positions: (Q, K)."""
        return np.take_along_axis(values, self.ranked, axis=1)

    def prefix_sums(self, values: np.ndarray) -> np.ndarray:
        """Exclusive prefix sums of the ranked values: (Q, K + 1), entry p = Σ of positions < p."""
        ranked = self.ranked_values(values)
        out = np.zeros((ranked.shape[0], ranked.shape[1] + 1))
        np.cumsum(ranked, axis=1, out=out[:, 1:])
        return out

    def group_sums(self, values: np.ndarray) -> np.ndarray:
        """Σ of ``values`` over the full group of each position: (Q, K)."""
        prefix = self.prefix_sums(values)
        sums = np.take_along_axis(prefix, self.end, axis=1) - np.take_along_axis(prefix, self.start, axis=1)
        if self.partial is not None:
            sums = np.where(self.boundary, self.partial.boundary_sum(values)[:, None], sums)
        return sums

    def sum_before_group(self, values: np.ndarray) -> np.ndarray:
        """Σ of ``values`` over the items ranked before each position's group: (Q, K)."""
        return np.take_along_axis(self.prefix_sums(values), self.start, axis=1)

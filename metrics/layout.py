"""Ranked positions of a compact batch and their tie groups, shared by every metric and cutoff.

A :class:`Layout` describes, for each of the K ranked positions of every query, the group it
belongs to: its start ``c`` (items ranked before the group), its end and its full size ``|G|`` —
enough for every closed form in :mod:`steadyrank.metrics.formulas`. The tie-aware layout ranks a
compact row (:mod:`steadyrank.metrics.compact`) by score, so the group at position K is complete
wherever its members differ in value. A fixed order (tie-oblivious, best case, worst case, PROC)
is a layout of singleton groups, so the same formulas give its exact metric value; they take
their shortcuts when ``singleton`` is set.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from steadyrank.metrics.values import ItemGrid, ItemValue, gather, running_sum


def largest_sorted(values: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` largest values of each row, in descending order (fewer where the row is shorter).

    O(W + k log k) per row: a partition, then a sort of the k selected values (values only: no
    index sort, which costs several times more along short rows).
    """
    width: int = values.shape[1]
    k = min(k, width)
    chosen = np.partition(values, width - k, axis=1)[:, width - k :] if k < width else values
    return np.sort(chosen, axis=1)[:, ::-1]


@dataclass(frozen=True)
class Layout:
    """Group structure of the ranked positions of each query.

    ``ranked`` (Q, N ≥ K) lists the grid columns by rank (any order consistent with the groups;
    ``None``: the grid's own column order);
    position j lies in a group starting at ``group_start[j]`` (items ranked before it) and ending
    at ``group_end[j]`` (exclusive). ``start``, ``end`` and ``size`` are those of the first K positions.
    """

    grid: ItemGrid
    ranked: np.ndarray | None  # (Q, N) int
    group_start: np.ndarray  # (Q, N) int
    group_end: np.ndarray  # (Q, N) int
    kmax: int
    singleton: bool = False

    @classmethod
    def fixed(cls, grid: ItemGrid, ranked: np.ndarray | None, kmax: int) -> Layout:
        """A fixed order of the first ``kmax`` columns of ``ranked`` (or of the grid): singleton groups."""
        shape = (grid.n_rows, kmax)
        starts, ends = np.broadcast_to(np.arange(kmax), shape), np.broadcast_to(np.arange(1, kmax + 1), shape)
        return cls(grid, None if ranked is None else ranked[:, :kmax], starts, ends, kmax, singleton=True)

    @classmethod
    def tied(cls, grid: ItemGrid, ranked: np.ndarray | None, sorted_scores: np.ndarray, kmax: int) -> Layout:
        """The tie groups (runs of equal ``sorted_scores``, (Q, N)) of ``ranked``, cut at ``kmax`` positions."""
        width: int = sorted_scores.shape[1]
        positions = np.arange(width)[None, :]
        new_group = np.ones(sorted_scores.shape, dtype=bool)
        new_group[:, 1:] = sorted_scores[:, 1:] != sorted_scores[:, :-1]
        start = np.maximum.accumulate(np.where(new_group, positions, 0), axis=1)
        ends_here = np.ones(sorted_scores.shape, dtype=bool)
        ends_here[:, :-1] = new_group[:, 1:]
        after = np.where(ends_here, positions + 1, width)
        end = np.minimum.accumulate(after[:, ::-1], axis=1)[:, ::-1]
        return cls(grid, ranked, start, end, kmax)

    @property
    def start(self) -> np.ndarray:
        """Items ranked before the group of each of the first K positions: (Q, K)."""
        return self.group_start[:, : self.kmax]

    @property
    def end(self) -> np.ndarray:
        """End (exclusive) of the group of each of the first K positions: (Q, K)."""
        return self.group_end[:, : self.kmax]

    @property
    def size(self) -> np.ndarray:
        """Size of the group of each of the first K positions, float64: (Q, K)."""
        return (self.end - self.start).astype(np.float64)

    def values(self, value: ItemValue) -> np.ndarray:
        """``value`` at the ranked positions: (Q, N)."""
        if self.ranked is None:
            width: int = self.group_start.shape[1]
            return self.grid.values(value)[:, :width]
        return self.grid.values(value, self.ranked)

    def group_totals(self, ranked_values: np.ndarray) -> np.ndarray:
        """Σ of per-position ``ranked_values`` (Q, N) over the group of each of the first K positions: (Q, K)."""
        if self.singleton:
            return ranked_values[:, : self.kmax]
        prefix = _exclusive_cumsum(ranked_values)
        return gather(prefix, self.end) - gather(prefix, self.start)

    def group_sums(self, value: ItemValue) -> np.ndarray:
        """Σ of ``value`` over the full group of each position: (Q, K)."""
        return self.group_totals(self.values(value))

    def group_means(self, value: ItemValue) -> np.ndarray:
        """Mean of ``value`` over the group of each position (its expected value there): (Q, K)."""
        return self.values(value)[:, : self.kmax] if self.singleton else self.group_sums(value) / self.size

    def sum_before_group(self, value: ItemValue) -> np.ndarray:
        """Σ of ``value`` over the items ranked before each position's group: (Q, K)."""
        prefix = _exclusive_cumsum(self.values(value))
        return prefix[:, : self.kmax] if self.singleton else gather(prefix, self.start)


def _exclusive_cumsum(values: np.ndarray) -> np.ndarray:
    """Exclusive prefix sums along rows: (Q, N + 1), entry j = Σ of entries < j."""
    out = np.zeros((values.shape[0], values.shape[1] + 1))
    out[:, 1:] = running_sum(values)
    return out

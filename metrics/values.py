"""Per-item metric values, evaluated lazily at gathered columns of a batch.

Every metric ranks by a per-item value derived from a candidate's grade (relevance, gain, ERR
stop probability, RA-nWG weight, rubric indicators). The closed forms only read those values at
a few columns per query — the top K, the boundary tie group, the judged items — so an
:class:`ItemValue` stores the transform and applies it to the grades gathered there, instead of
materialising a full ``(Q, W)`` array per metric. A :class:`GradeGrid` gathers the grades at each
column matrix once and shares them between all values of a batch.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def gather(array: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``array[q, cols[q, j]]`` for every row q (``np.take_along_axis(array, cols, axis=1)``).

    Implemented as one flat ``np.take``, several times faster than 2-D fancy indexing.
    """
    n_rows: int
    width: int
    n_rows, width = array.shape
    return np.take(array, cols + (np.arange(n_rows) * width)[:, None])

#: transform(grades, rubric, valid) → values, all arrays of one shape (gathered columns).
Transform = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


class GradeGrid:
    """The grades, rubric grades and validity of a batch, gathered once per column matrix."""

    def __init__(self, grades: np.ndarray, rubric: np.ndarray, valid: np.ndarray) -> None:
        self.grades, self.rubric, self.valid = grades, rubric, valid
        self._gathered: dict[int, tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}

    def at(self, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(grades, rubric, valid) at column indices ``cols`` (Q, n), memoised by the array."""
        hit = self._gathered.get(id(cols))
        if hit is not None and hit[0] is cols:
            return hit[1]
        grades = gather(self.grades, cols)
        rubric = grades if self.rubric is self.grades else gather(self.rubric, cols)
        triple = (grades, rubric, gather(self.valid, cols))
        self._gathered[id(cols)] = (cols, triple)  # keeps ``cols`` alive, so its id stays unique
        return triple


class ItemValue:
    """A per-item value of a batch, computed from grades at the columns asked for."""

    def __init__(self, grid: GradeGrid, transform: Transform) -> None:
        self.grid, self.transform = grid, transform
        self._memo: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def at(self, cols: np.ndarray) -> np.ndarray:
        """Values at column indices ``cols`` (Q, n) → float64 (Q, n), memoised by the array."""
        hit = self._memo.get(id(cols))
        if hit is not None and hit[0] is cols:
            return hit[1]
        values = np.asarray(self.transform(*self.grid.at(cols)), dtype=np.float64)
        self._memo[id(cols)] = (cols, values)
        return values

    @property
    def valid(self) -> np.ndarray:
        return self.grid.valid

    def full(self) -> np.ndarray:
        """Values of every item (Q, W); only for the rare orders that must scan all items."""
        return np.asarray(self.transform(self.grid.grades, self.grid.rubric, self.grid.valid), dtype=np.float64)

    def map(self, function: Callable[[np.ndarray], np.ndarray]) -> ItemValue:
        """The value ``function(self)``, still lazy."""
        inner = self.transform
        return ItemValue(self.grid, lambda g, r, v: function(inner(g, r, v)))

"""Per-item metric values, evaluated lazily at gathered columns of a compact batch.

Every metric ranks by a per-item value derived from a candidate's attributes: its grade, its grade on
the 1–5 rubric, whether it is a real candidate (``valid``) and optional extra labels (an UDCG utility
or distraction label, a source id). An :class:`ItemValue` holds only the transform from those
attributes to the value; an :class:`ItemGrid` holds the attributes of a batch's items and applies a
value at the columns a layout ranks (the top K, a pool order), gathering each column matrix once.
Invalid items (pads) have value 0 in every metric: the grid zeroes them after the transform.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

#: Upper-triangular ones matrices by size, for :func:`running_sum`.
_TRIANGLES: dict[int, np.ndarray] = {}
#: Longest rows summed by a matrix product (O(n²) per row); longer ones by ``np.cumsum``.
_PRODUCT_WIDTH = 64


def running_sum(values: np.ndarray) -> np.ndarray:
    """Cumulative sums along the rows of a (Q, n) array of finite values, float64.

    Short rows are summed as one product with an upper-triangular ones matrix, several times faster
    than ``np.cumsum`` along short rows (a loop per row); integer-valued sums stay exact.
    """
    width: int = values.shape[1]
    if width > _PRODUCT_WIDTH or width == 0:
        return np.cumsum(values, axis=1, dtype=np.float64)
    triangle = _TRIANGLES.get(width)
    if triangle is None:
        triangle = _TRIANGLES.setdefault(width, np.triu(np.ones((width, width))))
    return np.asarray(values, dtype=np.float64) @ triangle


@functools.lru_cache(maxsize=32)
def _row_starts(n_rows: int, width: int) -> np.ndarray:
    """Flat index of the first entry of each row of a (n_rows, width) array: (n_rows, 1), read-only."""
    starts = (np.arange(n_rows) * width)[:, None]
    starts.flags.writeable = False
    return starts


def flat_indices(array: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Flat indices of ``array[q, cols[q, j]]`` into a (Q, W) array, for ``np.take``."""
    n_rows: int
    width: int
    n_rows, width = array.shape
    return cols + _row_starts(n_rows, width)


def gather(array: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``array[q, cols[q, j]]`` for every row q (``np.take_along_axis(array, cols, axis=1)``).

    Implemented as one flat ``np.take``, several times faster than 2-D fancy indexing.
    """
    return np.take(array, flat_indices(array, cols))


@dataclass(frozen=True)
class Items:
    """The attributes of some items, all arrays of one shape: what an item value is computed from."""

    grade: np.ndarray
    rubric: np.ndarray
    valid: np.ndarray
    extras: Mapping[str, np.ndarray] = field(default_factory=lambda: MappingProxyType({}))

    def extra(self, name: str) -> np.ndarray:
        """The extra label ``name`` (KeyError naming the labels present when it is missing)."""
        try:
            return self.extras[name]
        except KeyError:
            raise KeyError(f"this metric needs the item label {name!r}; present: {sorted(self.extras)}") from None

    def at(self, cols: np.ndarray) -> Items:
        """The attributes at column indices ``cols`` (Q, n) of these (Q, W) attributes."""
        flat = flat_indices(self.grade, cols)
        grade = np.take(self.grade, flat)
        rubric = grade if self.rubric is self.grade else np.take(self.rubric, flat)
        return Items(grade, rubric, np.take(self.valid, flat),
                     MappingProxyType({k: np.take(v, flat) for k, v in self.extras.items()}))

    def rows(self, rows: np.ndarray) -> Items:
        """The same attributes for a subset of rows."""
        grade = self.grade[rows]
        return Items(grade, grade if self.rubric is self.grade else self.rubric[rows], self.valid[rows],
                     MappingProxyType({k: v[rows] for k, v in self.extras.items()}))


def column_indices(array: np.ndarray) -> np.ndarray:
    """Every column index of a (Q, N) array, per row: (Q, N) (a broadcast view)."""
    width: int = array.shape[1]
    return np.broadcast_to(np.arange(width), array.shape)


#: transform(items) → values of the same shape as the items' arrays.
Transform = Callable[[Items], np.ndarray]


class ItemValue:
    """A per-item value: a transform of the item attributes, applied by an :class:`ItemGrid`."""

    def __init__(self, transform: Transform) -> None:
        self.transform = transform

    def map(self, function: Callable[[np.ndarray], np.ndarray]) -> ItemValue:
        """The value ``function(self)``, still lazy."""
        inner = self.transform
        return ItemValue(lambda items: function(inner(items)))


class ItemGrid:
    """The attributes of a batch's items (Q, N), and item values gathered at column matrices.

    Gathered attributes and values are memoised by the identity of the column matrix (layouts
    share theirs), so each is computed once per batch.
    """

    def __init__(self, items: Items) -> None:
        self.items = items
        self.n_rows: int = items.grade.shape[0]
        self._gathered: dict[int, tuple[np.ndarray, Items]] = {}
        self._values: dict[tuple[int, int], tuple[np.ndarray | None, ItemValue, np.ndarray]] = {}

    def at(self, cols: np.ndarray | None) -> Items:
        """The attributes at column indices ``cols`` (Q, n), memoised by the array; ``None``: every column."""
        if cols is None:
            return self.items
        hit = self._gathered.get(id(cols))
        if hit is not None and hit[0] is cols:
            return hit[1]
        items = self.items.at(cols)
        self._gathered[id(cols)] = (cols, items)  # keeps ``cols`` alive, so its id stays unique
        return items

    def values(self, value: ItemValue, cols: np.ndarray | None = None) -> np.ndarray:
        """``value`` at column indices ``cols`` (Q, n; ``None``: every column) → float64, 0 for invalid
        items; memoised."""
        key = (id(value), id(cols))
        hit = self._values.get(key)
        if hit is not None and hit[0] is cols and hit[1] is value:
            return hit[2]
        items = self.at(cols)
        out = np.asarray(value.transform(items), dtype=np.float64) * items.valid  # values are finite
        self._values[key] = (cols, value, out)
        return out

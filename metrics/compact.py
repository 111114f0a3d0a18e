"""Stage one of the engine: each query reduced to the few candidates any statistic can see.

At cutoff K, only three kinds of candidates matter (docs/ARCHITECTURE.md "Metric definitions"):

- the top K by score (one ``argpartition`` per row, O(W)): every item above the K-th largest score
  ``v`` is in the top K under every tie order, and every tie group above ``v`` is complete there;
- the boundary group (score == v) in full, but only where a *special* candidate belongs to it: an
  item whose attributes (grade, rubric grade, labels) differ from an unjudged candidate's. Where
  the group holds only unjudged candidates, all its members carry the same value in every metric,
  so which of them fill the last positions, and how many there are, changes nothing;
- the special candidates themselves (PROC orders the whole valid pool by item value: the special
  ones plus, standing for all the rest, K unjudged candidates while the row has that many).

Special candidates are found by scanning the attribute arrays for values off their defaults (on
64-bit words of the raw bytes where the layout allows, eight int8 grades a word); the boundary
group is scanned only in rows where a special candidate ties at ``v``. So beyond the one
``argpartition`` pass, the work is O(W / 8) per row plus O(K + specials + boundary) per row.

The result, a :class:`CompactBatch`, holds the ranking candidates of each row in rank order (score
descending, ties in input order: the ``input`` tie-break), whether a tie touches a special
candidate there, and the pool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np

from steadyrank.metrics.batch import Batch
from steadyrank.metrics.values import Items, flat_indices, gather

#: Rows scanned at once: a chunk's scores stay in cache between the passes over them.
SCAN_ROWS = 1024
#: docid rank of pads and stand-in unjudged items: after every real candidate.
_LAST = np.iinfo(np.int64).max
#: A rank sort key (int64): the score's 32 order-preserving bits, the column, the position in the row.
_COLUMN_BITS, _POSITION_BITS = 20, 10
_COLUMN_LIMIT, _POSITION_LIMIT = 1 << _COLUMN_BITS, 1 << _POSITION_BITS


@dataclass(frozen=True)
class CompactBatch:
    """The candidates of Q queries that the statistics at cutoffs ≤ ``kmax`` depend on.

    ``scores``/``ranking``/``special``/``docid_rank`` (Q, N ≥ kmax): the top ``kmax`` and, where a
    special candidate ties at the ``kmax``-th score, that whole tie group, in rank order (score
    descending, ties in input order), pads (score ``-inf``, invalid) last. ``tied`` (Q,): rows where
    a special candidate of a group reaching the first ``kmax`` ranks shares its score with another
    (elsewhere every tie order gives the same value). ``pool`` (Q, P ≥ kmax): the special valid candidates, then
    ``kmax`` stand-ins for the unjudged valid candidates (valid while the row has that many).
    ``judged*`` are the queries' judged pools, as in :class:`~steadyrank.metrics.batch.Batch`.
    """

    kmax: int
    scores: np.ndarray
    ranking: Items
    special: np.ndarray
    tied: np.ndarray
    docid_rank: np.ndarray | None
    pool: Items
    judged: np.ndarray
    judged_rubric: np.ndarray
    judged_labels: MappingProxyType[str, np.ndarray]

    @property
    def n_queries(self) -> int:
        return int(self.scores.shape[0])

    def head(self) -> CompactBatch:
        """The same batch with only the first ``kmax`` ranks of each row (all a fixed order reads)."""
        if self.scores.shape[1] == self.kmax:
            return self

        def first(values: np.ndarray) -> np.ndarray:
            return values[:, : self.kmax]

        return replace(self, scores=first(self.scores), ranking=_map_items(self.ranking, first),
                       special=first(self.special), docid_rank=None if self.docid_rank is None else first(self.docid_rank))

    def rows(self, rows: np.ndarray) -> CompactBatch:
        """The same batch restricted to ``rows``."""
        return replace(
            self, scores=self.scores[rows], ranking=self.ranking.rows(rows), special=self.special[rows], tied=self.tied[rows],
            docid_rank=None if self.docid_rank is None else self.docid_rank[rows], pool=self.pool.rows(rows),
            judged=self.judged[rows], judged_rubric=self.judged_rubric[rows],
            judged_labels=MappingProxyType({k: v[rows] for k, v in self.judged_labels.items()}),
        )


def all_finite(scores: np.ndarray, top_scores: np.ndarray) -> bool:
    """Whether every score of ``scores`` (Q, W) is finite, given each row's top scores (Q, K ≥ 1) from
    ``argpartition``.

    numpy's partition orders NaN above +inf above every finite value, so a row holding NaN or +inf
    has one among its top K, and NaN and -inf propagate to the minimum: one vectorised ``min`` (no
    overflow, cheaper than a sum) and a check of the top K decide it exactly.
    """
    with np.errstate(invalid="ignore"):
        return scores.size == 0 or (bool(np.isfinite(scores.min())) and bool(np.isfinite(top_scores).all()))


def _flat_nonzero(array: np.ndarray) -> np.ndarray:
    """Flat indices of the non-zero entries of a 2-D array.

    A C-contiguous array whose rows are whole 64-bit words is scanned a word at a time (eight int8
    grades per word), then only the non-zero words are looked into; otherwise ``flatnonzero``.
    """
    itemsize = array.dtype.itemsize
    if not (array.flags.c_contiguous and array.ndim == 2 and (array.shape[1] * itemsize) % 8 == 0
            and itemsize <= 8 and array.dtype.kind in "iuf"):
        return np.flatnonzero(array)
    per_word = 8 // itemsize
    words = np.frombuffer(array, dtype=np.uint64)
    hot = np.flatnonzero(words != 0)  # nonzero of a bool mask: several times faster than of the words
    inside = np.flatnonzero(np.frombuffer(words[hot], dtype=array.dtype) != 0)
    word, offset = np.divmod(inside, per_word)
    return hot[word] * per_word + offset


def _special_flat(batch: Batch, begin: int, end: int) -> np.ndarray:
    """Flat indices (into the chunk) of the candidates whose attributes differ from an unjudged one's."""
    found = [_flat_nonzero(batch.grades[begin:end])]
    if batch.rubric is not batch.grades:
        found.append(np.flatnonzero(batch.rubric[begin:end] != batch.unjudged_rubric))
    for name, labels in batch.labels.items():
        found.append(np.flatnonzero(labels[begin:end] != batch.label_defaults[name]))
    return found[0] if len(found) == 1 else np.unique(np.concatenate(found))


def _pack(rows: np.ndarray, values: np.ndarray, n_rows: int, min_width: int, fill: float | bool) -> np.ndarray:
    """``values`` grouped by row (``rows`` sorted), left-aligned in an (n_rows, N) matrix padded with ``fill``."""
    counts = np.bincount(rows, minlength=n_rows)
    out = np.full((n_rows, max(int(counts.max(initial=0)), min_width)), fill, dtype=values.dtype)
    out[rows, np.arange(rows.size) - (np.cumsum(counts) - counts)[rows]] = values
    return out


def _take_items(batch: Batch, begin: int, end: int, flat: np.ndarray, scores: np.ndarray) -> Items:
    """The attributes of the candidates at ``flat`` (indices into rows ``begin:end`` taken flat, any
    shape) whose ``scores`` are given."""
    block = slice(begin, end)
    grade = np.take(batch.grades[block], flat)
    rubric = grade if batch.rubric is batch.grades else np.take(batch.rubric[block], flat)
    valid = np.isfinite(scores) if batch.valid is None else np.take(batch.valid[block], flat)
    labels = {name: np.take(values[block], flat) for name, values in batch.labels.items()}
    return Items(grade, rubric, valid, MappingProxyType(labels))


def _map_items(items: Items, function: Callable[[np.ndarray], np.ndarray]) -> Items:
    grade = function(items.grade)
    rubric = grade if items.rubric is items.grade else function(items.rubric)
    return Items(grade, rubric, function(items.valid), MappingProxyType({k: function(v) for k, v in items.extras.items()}))


def _join_items(parts: list[Items], join: Callable[[list[np.ndarray]], np.ndarray]) -> Items:
    first = parts[0]
    grade = join([p.grade for p in parts])
    rubric = grade if first.rubric is first.grade else join([p.rubric for p in parts])
    labels = {name: join([p.extras[name] for p in parts]) for name in first.extras}
    return Items(grade, rubric, join([p.valid for p in parts]), MappingProxyType(labels))


@dataclass(frozen=True)
class _Scan:
    """Stage one's pass over the rows: the top K of every row and the special candidates."""

    top: np.ndarray  # (Q, K') columns, any order
    top_scores: np.ndarray  # (Q, K')
    top_items: Items  # (Q, K')
    special_flat: np.ndarray  # (S,) flat indices into the batch, valid special candidates
    special_scores: np.ndarray  # (S,)
    special_items: Items  # (S,)


def _scan(batch: Batch, kmax: int) -> _Scan:
    """One ``argpartition``, its gathers and one word-wise scan per block of rows, while the block is in cache."""
    n_rows: int
    width: int
    n_rows, width = batch.scores.shape
    top_width = min(kmax, width)
    top = np.empty((n_rows, top_width), dtype=np.intp)
    top_scores = np.empty((n_rows, top_width), dtype=batch.scores.dtype)
    top_items: list[Items] = []
    flats: list[np.ndarray] = []
    special_scores: list[np.ndarray] = []
    special_items: list[Items] = []
    for begin in range(0, max(n_rows, 1), SCAN_ROWS):
        end = min(begin + SCAN_ROWS, n_rows)
        scores = batch.scores[begin:end]
        if kmax < width:
            block = np.argpartition(scores, width - kmax, axis=1)[:, width - kmax :]
        else:
            block = np.broadcast_to(np.arange(width), scores.shape)
        flat = flat_indices(scores, block)
        top[begin:end] = block
        top_scores[begin:end] = np.take(scores, flat)
        if batch.require_finite and not all_finite(scores, top_scores[begin:end]):
            raise ValueError("scores must be finite (NaN or inf found)")
        top_items.append(_take_items(batch, begin, end, flat, top_scores[begin:end]))
        local = _special_flat(batch, begin, end)
        found_scores = np.take(scores, local)
        found = _take_items(batch, begin, end, local, found_scores)
        keep = found.valid
        flats.append(local[keep] + begin * width)
        special_scores.append(found_scores[keep])
        special_items.append(_map_items(found, lambda a, keep=keep: a[keep]))
    return _Scan(top, top_scores, _join_items(top_items, np.concatenate), np.concatenate(flats),
                 np.concatenate(special_scores), _join_items(special_items, np.concatenate))


def _rank_permutation(cols: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Per row, the positions of (``cols``, ``scores``) by score descending, ties by column (pads,
    column -1, last): (Q, N).

    float32 scores, columns below 2^20 and rows of at most 1024 are sorted as one int64 key per item
    (the score's order-preserving 32 bits, the column, the position), a plain sort instead of an
    index sort, which costs several times more along short rows; otherwise two stable index sorts.
    """
    width: int = cols.shape[1]
    if scores.dtype == np.float32 and width <= _POSITION_LIMIT and int(cols.max(initial=0)) < _COLUMN_LIMIT - 1:
        canonical = np.ascontiguousarray(scores + np.float32(0))  # + 0: -0.0 ties with 0.0 as +0.0
        bits = np.reshape(np.frombuffer(canonical, dtype=np.uint32), scores.shape).astype(np.int64)
        ascending = np.where(bits & 0x80000000, bits ^ 0xFFFFFFFF, bits | 0x80000000)  # grows with the score
        column = np.where(cols < 0, _COLUMN_LIMIT - 1, cols)
        keys = ((0xFFFFFFFF - ascending) << (_COLUMN_BITS + _POSITION_BITS)) | (column << _POSITION_BITS)
        keys |= np.arange(width)[None, :]
        keys.sort(axis=1)
        return keys & (_POSITION_LIMIT - 1)
    by_column = np.argsort(np.where(cols < 0, np.iinfo(np.int64).max, cols), axis=1, kind="stable")
    return gather(by_column, np.argsort(-gather(scores, by_column), axis=1, kind="stable"))


def _permuter(like: np.ndarray, order: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``gather(·, order)`` for arrays shaped like ``like`` (Q, N), its flat indices computed once."""
    flat = flat_indices(like, order)
    return lambda values: np.take(values, flat)


def _boundary_groups(batch: Batch, scan: _Scan, kmax: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(boundary rows, their columns: the items above the K-th score and its whole tie group, -1
    padded) for the rows where a special candidate ties at the K-th score."""
    width: int = batch.scores.shape[1]
    kth = scan.top_scores.min(axis=1)
    boundary_rows = np.unique(rows[scan.special_scores == kth[rows]])
    if boundary_rows.size == 0:
        return boundary_rows, np.zeros((0, kmax), dtype=np.intp)
    in_group = batch.scores[boundary_rows] == kth[boundary_rows, None]
    group_rows, group_cols = np.divmod(np.flatnonzero(in_group), width)
    above = scan.top_scores[boundary_rows] > kth[boundary_rows, None]
    above_rows = np.broadcast_to(np.arange(boundary_rows.size)[:, None], above.shape)[above]
    all_rows = np.concatenate([above_rows, group_rows])
    all_cols = np.concatenate([scan.top[boundary_rows][above], group_cols])
    order = np.argsort(all_rows, kind="stable")
    return boundary_rows, _pack(all_rows[order], all_cols[order], boundary_rows.size, kmax, -1)


def _tied_special(sorted_scores: np.ndarray, special: np.ndarray, kmax: int) -> np.ndarray:
    """Rows where a special item of a group reaching the first K ranks shares its score with another item."""
    same = sorted_scores[:, 1:] == sorted_scores[:, :-1]
    tied = np.zeros(sorted_scores.shape, dtype=bool)
    tied[:, 1:] |= same
    tied[:, :-1] |= same
    if sorted_scores.shape[1] > kmax:  # past rank K the compact row holds only the group at rank K (and pads)
        tied[:, kmax:] &= sorted_scores[:, kmax:] == sorted_scores[:, kmax - 1 : kmax]
    found: np.ndarray = np.any(special & tied, axis=1)
    return found


def _pad_items(batch: Batch, items: Items, width: int) -> Items:
    """``items`` (Q, n) padded on the right to ``width`` columns with pads (invalid, unjudged attributes)."""
    extra = width - items.grade.shape[1]
    if extra <= 0:
        return items

    def pad(values: np.ndarray, fill: float | bool) -> np.ndarray:
        return np.pad(values, ((0, 0), (0, extra)), constant_values=fill)

    grade = pad(items.grade, 0)
    rubric = grade if items.rubric is items.grade else pad(items.rubric, batch.unjudged_rubric)
    labels = {name: pad(v, batch.label_defaults[name]) for name, v in items.extras.items()}
    return Items(grade, rubric, pad(items.valid, False), MappingProxyType(labels))


def _attributes(batch: Batch, rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, Items]:
    """(scores, attributes) of ``rows`` at ``cols`` (n, N); -1 is a pad (score -inf, invalid, unjudged)."""
    n_rows: int
    width: int
    n_rows, width = batch.scores.shape
    pad = cols < 0
    flat = np.where(pad, 0, cols) + (rows * width)[:, None]
    scores = np.where(pad, -np.inf, np.take(batch.scores, flat))
    items = _take_items(batch, 0, n_rows, flat, scores)
    grade = np.where(pad, 0, items.grade).astype(items.grade.dtype)
    rubric = grade if items.rubric is items.grade else np.where(pad, batch.unjudged_rubric, items.rubric)
    labels = {name: np.where(pad, batch.label_defaults[name], v) for name, v in items.extras.items()}
    return scores, Items(grade, rubric, items.valid & ~pad, MappingProxyType(labels))


def _arrays(items: Items) -> list[np.ndarray]:
    """The distinct arrays of ``items`` in a fixed order (grade, rubric if its own, valid, labels by name)."""
    out = [items.grade] + ([] if items.rubric is items.grade else [items.rubric]) + [items.valid]
    return out + [items.extras[name] for name in sorted(items.extras)]


def _pack_items(batch: Batch, rows: np.ndarray, items: Items, n_rows: int) -> Items:
    """1-D ``items`` grouped by their (sorted) ``rows`` into (n_rows, S) arrays, padded with pads."""
    grade = _pack(rows, items.grade, n_rows, 0, 0)
    rubric = grade if items.rubric is items.grade else _pack(rows, items.rubric, n_rows, 0, batch.unjudged_rubric)
    labels = {name: _pack(rows, v, n_rows, 0, batch.label_defaults[name]) for name, v in items.extras.items()}
    return Items(grade, rubric, _pack(rows, items.valid, n_rows, 0, False), MappingProxyType(labels))


def _stand_ins(batch: Batch, n_default: np.ndarray, kmax: int) -> Items:
    """``kmax`` unjudged candidates per row, valid while the row has that many."""
    shape = (n_default.size, kmax)
    valid = np.arange(kmax)[None, :] < n_default[:, None]
    grade = np.zeros(shape, dtype=batch.grades.dtype)
    rubric = grade if batch.rubric is batch.grades else np.full(shape, batch.unjudged_rubric)
    labels = {name: np.full(shape, batch.label_defaults[name]) for name in batch.labels}
    return Items(grade, rubric, valid, MappingProxyType(labels))


def compact_batch(batch: Batch, kmax: int) -> CompactBatch:
    """Reduce ``batch`` to the candidates that statistics at cutoffs ≤ ``kmax`` depend on."""
    n_rows: int
    width: int
    n_rows, width = batch.scores.shape
    scan = _scan(batch, kmax)
    rows = scan.special_flat // width
    # every row: its top K in rank order (score descending, ties in input order: the ``input`` tie-break)
    order = _rank_permutation(scan.top, scan.top_scores)
    ranked = _permuter(scan.top, order)
    ranking_cols, ranked_scores, ranking = ranked(scan.top), ranked(scan.top_scores), _map_items(scan.top_items, ranked)
    if ranking_cols.shape[1] < kmax:
        ranking = _pad_items(batch, ranking, kmax)
        extra = ((0, 0), (0, kmax - ranking_cols.shape[1]))
        ranking_cols = np.pad(ranking_cols, extra, constant_values=-1)
        ranked_scores = np.pad(ranked_scores, extra, constant_values=-np.inf)
    # rows where a special candidate ties at the K-th score: the whole tie group
    boundary_rows, boundary_cols = _boundary_groups(batch, scan, kmax, rows)
    if boundary_rows.size:
        group_width: int = max(boundary_cols.shape[1], kmax)
        boundary_scores, boundary_items = _attributes(batch, boundary_rows, boundary_cols)
        by_rank = _rank_permutation(boundary_cols, boundary_scores)
        ranking = _pad_items(batch, ranking, group_width)
        ranking_cols = np.pad(ranking_cols, ((0, 0), (0, group_width - kmax)), constant_values=-1)
        ranked_scores = np.pad(ranked_scores, ((0, 0), (0, group_width - kmax)), constant_values=-np.inf)
        group_ranked = _permuter(boundary_cols, by_rank)
        ranking_cols[boundary_rows] = group_ranked(boundary_cols)
        ranked_scores[boundary_rows] = group_ranked(boundary_scores)
        for mine, theirs in zip(_arrays(ranking), _arrays(_map_items(boundary_items, group_ranked)),
                                strict=True):
            mine[boundary_rows] = theirs
    docid_rank = None
    if batch.docid_rank is not None:
        docid_rank = np.where(ranking_cols < 0, _LAST, gather(batch.docid_rank, np.maximum(ranking_cols, 0)))
    n_default = batch.valid_counts() - np.bincount(rows, minlength=n_rows)
    pool = _join_items([_pack_items(batch, rows, scan.special_items, n_rows), _stand_ins(batch, n_default, kmax)],
                       lambda parts: np.concatenate(parts, axis=1))
    special = _is_special(batch, ranking)
    return CompactBatch(
        kmax, ranked_scores, ranking, special, _tied_special(ranked_scores, special, kmax), docid_rank, pool,
        batch.judged, batch.judged_rubric, MappingProxyType(dict(batch.judged_labels)),
    )


def _is_special(batch: Batch, items: Items) -> np.ndarray:
    """Valid items whose attributes differ from an unjudged candidate's."""
    special = items.grade != 0
    if items.rubric is not items.grade:
        special |= items.rubric != batch.unjudged_rubric
    for name, values in items.extras.items():
        special |= values != batch.label_defaults[name]
    return special & items.valid

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

from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np

from steadyrank.metrics.batch import Batch
from steadyrank.metrics.values import Items, flat_indices, gather

#: Rows scanned at once: a chunk's scores stay in cache between the passes over them.
SCAN_ROWS = 1024
#: docid rank of pads and stand-in unjudged items: after every real candidate.
_LAST = np.iinfo(np.int64).max
#: Bits of the column in a rank sort key (the score's 32 bits above them).
_COLUMN_BITS = 20
_COLUMN_LIMIT = 1 << _COLUMN_BITS


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

    def rows(self, rows: np.ndarray) -> CompactBatch:
        """The same batch restricted to ``rows``."""
        return replace(
            self, scores=self.scores[rows], ranking=self.ranking.rows(rows), special=self.special[rows], tied=self.tied[rows],
            docid_rank=None if self.docid_rank is None else self.docid_rank[rows], pool=self.pool.rows(rows),
            judged=self.judged[rows], judged_rubric=self.judged_rubric[rows],
            judged_labels=MappingProxyType({k: v[rows] for k, v in self.judged_labels.items()}),
        )


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


def _pack(rows: np.ndarray, cols: np.ndarray, n_rows: int, min_width: int) -> np.ndarray:
    """Columns grouped by row (``rows`` sorted), left-aligned in an (n_rows, N) matrix padded with -1."""
    counts = np.bincount(rows, minlength=n_rows)
    out = np.full((n_rows, max(int(counts.max(initial=0)), min_width)), -1, dtype=np.int64)
    out[rows, np.arange(rows.size) - (np.cumsum(counts) - counts)[rows]] = cols
    return out


def _ranking_columns(scores: np.ndarray, top: np.ndarray, top_scores: np.ndarray, kmax: int, rows: np.ndarray,
                     cols: np.ndarray, special_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(columns, scores) of each row's top ``kmax`` (any order), with the whole tie group at the
    ``kmax``-th score where a special candidate (``rows``, ``cols``) belongs to it; -1 / -inf pads."""
    width: int = scores.shape[1]
    kth = top_scores.min(axis=1)
    ranking_cols, ranked_scores = top, top_scores
    if ranking_cols.shape[1] < kmax:
        extra = kmax - ranking_cols.shape[1]
        ranking_cols = np.pad(ranking_cols, ((0, 0), (0, extra)), constant_values=-1)
        ranked_scores = np.pad(ranked_scores, ((0, 0), (0, extra)), constant_values=-np.inf)
    boundary_rows = np.unique(rows[special_scores == kth[rows]])
    if boundary_rows.size == 0:
        return ranking_cols, ranked_scores
    # Rows where a special candidate ties at the K-th score: the items above it, then the whole group.
    in_group = scores[boundary_rows] == kth[boundary_rows, None]
    group_rows, group_cols = np.divmod(np.flatnonzero(in_group), width)
    above = top_scores[boundary_rows] > kth[boundary_rows, None]
    above_rows = np.broadcast_to(np.arange(boundary_rows.size)[:, None], above.shape)[above]
    all_rows = np.concatenate([above_rows, group_rows])
    all_cols = np.concatenate([top[boundary_rows][above], group_cols])
    order = np.lexsort((all_cols, all_rows))
    packed = _pack(all_rows[order], all_cols[order], boundary_rows.size, kmax)
    if packed.shape[1] > ranking_cols.shape[1]:
        extra = packed.shape[1] - ranking_cols.shape[1]
        ranking_cols = np.pad(ranking_cols, ((0, 0), (0, extra)), constant_values=-1)
        ranked_scores = np.pad(ranked_scores, ((0, 0), (0, extra)), constant_values=-np.inf)
    else:
        ranking_cols, ranked_scores = ranking_cols.copy(), ranked_scores.copy()
    ranking_cols[boundary_rows] = -1
    ranking_cols[boundary_rows, : packed.shape[1]] = packed
    ranked_scores[boundary_rows] = np.where(ranking_cols[boundary_rows] < 0, -np.inf,
                                            gather(scores[boundary_rows], np.maximum(ranking_cols[boundary_rows], 0)))
    return ranking_cols, ranked_scores


def _rank_order(cols: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cols, scores) of each row sorted by score descending, ties by column (pads, -1, last).

    float32 scores and columns below 2^20 are sorted as one int64 key per item (the score's
    order-preserving bits, then the column), a plain sort instead of an index sort; otherwise a
    stable index sort by score of the columns sorted first.
    """
    if scores.dtype == np.float32 and int(cols.max(initial=0)) < _COLUMN_LIMIT - 1:  # the last column value marks pads
        bits = (scores + np.float32(0)).view(np.uint32).astype(np.int64)  # + 0: -0.0 ties with 0.0 as +0.0
        ordered = np.where(bits & 0x80000000, bits ^ 0xFFFFFFFF, bits | 0x80000000)  # ascending with the score
        keys = ((0xFFFFFFFF - ordered) << _COLUMN_BITS) | np.where(cols < 0, _COLUMN_LIMIT - 1, cols)
        keys.sort(axis=1)
        sorted_cols = keys & (_COLUMN_LIMIT - 1)
        sorted_scores = (0xFFFFFFFF - (keys >> _COLUMN_BITS))
        sorted_scores = np.where(sorted_scores & 0x80000000, sorted_scores ^ 0x80000000, sorted_scores ^ 0xFFFFFFFF)
        pads = sorted_cols == _COLUMN_LIMIT - 1
        return np.where(pads, -1, sorted_cols), sorted_scores.astype(np.uint32).view(np.float32)
    by_column = np.argsort(np.where(cols < 0, np.iinfo(np.int64).max, cols), axis=1)
    cols, scores = gather(cols, by_column), gather(scores, by_column)
    order = np.argsort(-scores, axis=1, kind="stable")
    return gather(cols, order), gather(scores, order)


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


def _attributes(batch: Batch, cols: np.ndarray) -> Items:
    """The candidates' attributes at ``cols`` (Q, n); -1 is a pad (invalid, unjudged attributes)."""
    pad = cols < 0
    flat = flat_indices(batch.scores, np.where(pad, 0, cols))
    real = np.isfinite(np.take(batch.scores, flat)) if batch.valid is None else np.take(batch.valid, flat)
    grade = np.where(pad, 0, np.take(batch.grades, flat))
    rubric = grade if batch.rubric is batch.grades else np.where(pad, batch.unjudged_rubric, np.take(batch.rubric, flat))
    labels = {name: np.where(pad, batch.label_defaults[name], np.take(values, flat))
              for name, values in batch.labels.items()}
    return Items(grade, rubric, ~pad & real, MappingProxyType(labels))


def _stand_ins(batch: Batch, n_default: np.ndarray, kmax: int) -> Items:
    """``kmax`` unjudged candidates per row, valid while the row has that many."""
    shape = (n_default.size, kmax)
    valid = np.arange(kmax)[None, :] < n_default[:, None]
    grade = np.zeros(shape, dtype=batch.grades.dtype)
    rubric = grade if batch.rubric is batch.grades else np.full(shape, batch.unjudged_rubric)
    labels = {name: np.full(shape, batch.label_defaults[name]) for name in batch.labels}
    return Items(grade, rubric, valid, MappingProxyType(labels))


def _concat(a: Items, b: Items) -> Items:
    grade = np.concatenate([a.grade, b.grade], axis=1)
    rubric = grade if a.rubric is a.grade else np.concatenate([a.rubric, b.rubric], axis=1)
    labels = {name: np.concatenate([a.extras[name], b.extras[name]], axis=1) for name in a.extras}
    return Items(grade, rubric, np.concatenate([a.valid, b.valid], axis=1), MappingProxyType(labels))


def _scan(batch: Batch, kmax: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(top ``kmax`` columns of every row, any order; their scores; flat indices of the special
    candidates), a block of rows at a time: one ``argpartition``, its gather and one word-wise scan
    per block, while the block is in cache."""
    n_rows: int
    width: int
    n_rows, width = batch.scores.shape
    top_width = min(kmax, width)
    top = np.empty((n_rows, top_width), dtype=np.intp)
    top_scores = np.empty((n_rows, top_width), dtype=batch.scores.dtype)
    found: list[np.ndarray] = []
    for begin in range(0, n_rows, SCAN_ROWS):
        end = min(begin + SCAN_ROWS, n_rows)
        scores = batch.scores[begin:end]
        if kmax < width:
            block = np.argpartition(scores, width - kmax, axis=1)[:, width - kmax :]
        else:
            block = np.broadcast_to(np.arange(width), scores.shape)
        top[begin:end] = block
        top_scores[begin:end] = gather(scores, block)
        found.append(_special_flat(batch, begin, end) + begin * width)
    return top, top_scores, np.concatenate(found) if found else np.zeros(0, dtype=np.intp)


def compact_batch(batch: Batch, kmax: int) -> CompactBatch:
    """Reduce ``batch`` to the candidates that statistics at cutoffs ≤ ``kmax`` depend on."""
    n_rows: int
    width: int
    n_rows, width = batch.scores.shape
    top, top_scores, flat_special = _scan(batch, kmax)
    special_scores = np.take(batch.scores, flat_special)
    real = np.isfinite(special_scores) if batch.valid is None else np.take(batch.valid, flat_special)
    rows, cols = np.divmod(flat_special[real], width)
    ranking_cols, ranked_scores = _ranking_columns(batch.scores, top, top_scores, kmax, rows, cols, special_scores[real])
    # rank order: score descending, ties in input order (the ``input`` tie-break)
    ranking_cols, ranked_scores = _rank_order(ranking_cols, ranked_scores)
    docid_rank = None
    if batch.docid_rank is not None:
        docid_rank = np.where(ranking_cols < 0, _LAST, gather(batch.docid_rank, np.maximum(ranking_cols, 0)))
    n_default = batch.valid_counts() - np.bincount(rows, minlength=n_rows)
    pool = _concat(_attributes(batch, _pack(rows, cols, n_rows, 0)), _stand_ins(batch, n_default, kmax))
    ranking = _attributes(batch, ranking_cols)
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

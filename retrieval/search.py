"""Searching a loaded index: the in-memory state of one index (documents, FAISS, BM25, deletions)
and its dense, BM25 and hybrid search.

:class:`MemoryIndex` holds what a generation and its replayed write-ahead log load into memory and
answers queries from it; :class:`~retrieval.store.IndexStore` loads it from disk and makes changes
durable. One mutex serialises searches against mutations.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from steadyrank.retrieval.bm25 import Bm25Index, Bm25Settings, Bm25Stats
from steadyrank.retrieval.build import check_vectors
from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.dense import DenseIndex, DenseSettings
from steadyrank.retrieval.fusion import DEFAULT_RRF_K, reciprocal_rank_fusion
from steadyrank.retrieval.generations import IndexIntegrityError, decode_vectors, document_from_record
from steadyrank.retrieval.modes import MODES, Mode
from steadyrank.retrieval.protocols import Embedder


@dataclass(frozen=True)
class Hits:
    """One ranked list: document ids best first and their scores (same length)."""

    doc_ids: list[str]
    scores: np.ndarray


@dataclass(frozen=True)
class Candidates:
    """Retrieval result for one query.

    ``doc_ids``/``scores`` are the final list of the mode (cosine for dense, BM25 for bm25, RRF for
    hybrid); ``dense`` and ``sparse`` are the component lists that were computed (None otherwise);
    ``timings`` holds seconds per stage: ``embed``, ``dense``, ``bm25`` (plus ``bm25_refresh`` when
    mutations forced a BM25 rebuild), ``fuse``.
    """

    doc_ids: list[str]
    scores: np.ndarray
    dense: Hits | None
    sparse: Hits | None
    timings: dict[str, float]


def final_candidates(
    mode: Mode, dense: Hits | None, sparse: Hits | None, depth: int, rrf_k: float,
    rrf_weights: tuple[float, float], timings: dict[str, float],
) -> Candidates:
    """The mode's list from its component lists: dense, bm25, or their RRF (top ``depth``, timed as ``fuse``)."""
    if mode == "dense":
        assert dense is not None, "dense mode computes the dense list"
        return Candidates(dense.doc_ids, dense.scores, dense, None, timings)
    assert sparse is not None, f"{mode} mode computes the BM25 list"
    if mode == "bm25":
        return Candidates(sparse.doc_ids, sparse.scores, None, sparse, timings)
    assert dense is not None, "hybrid mode computes the dense list"
    started = time.perf_counter()
    ids, fused = reciprocal_rank_fusion([dense.doc_ids, sparse.doc_ids], k=rrf_k, weights=rrf_weights, limit=depth)
    timings["fuse"] = time.perf_counter() - started
    return Candidates(ids, fused, dense, sparse, timings)


class MemoryIndex:
    """One index's documents and search structures in memory: slot i is the i-th document of the
    generation, then the added ones; ``_live`` maps each live id to its slot (deleted slots stay
    until compaction; FAISS removes them, BM25 is rebuilt over the live slots on the next BM25
    search). Filled by :class:`~retrieval.store.IndexStore`; shards also carry corpus-wide ``seqs``
    and BM25 statistics."""

    root: Path
    embedder: Embedder | None
    manifest: dict[str, Any]
    dense_settings: DenseSettings
    bm25_settings: Bm25Settings | None
    shard: dict[str, Any] | None
    _mutex: threading.RLock
    _dense: DenseIndex
    _base_vectors: np.ndarray
    _added_vectors: list[np.ndarray]
    _docs: list[Document]
    _seqs: list[int]
    _live: dict[str, int]
    _bm25: Bm25Index | None
    _bm25_stale: bool
    _bm25_scored_with: str | None
    _bm25_stats: Bm25Stats | None = None

    def _apply(self, record: dict[str, Any]) -> None:
        """Apply one WAL record to the in-memory state (replay and live mutations share this)."""
        if record["op"] == "add":
            seqs = [d["seq"] for d in record["docs"]] if self.shard is not None else None
            self._apply_add([document_from_record(d) for d in record["docs"]], decode_vectors(record), seqs)
        elif record["op"] == "delete":
            self._apply_delete(record["ids"])
        else:
            raise IndexIntegrityError(f"unknown write-ahead log operation {record['op']!r}")

    def _apply_add(self, documents: Sequence[Document], vectors: np.ndarray, seqs: Sequence[int] | None = None) -> None:
        first = len(self._docs)
        self._seqs.extend(range(first, first + len(documents)) if seqs is None else (int(q) for q in seqs))
        self._dense.add(vectors)
        self._added_vectors.append(vectors)
        self._docs.extend(documents)
        self._live.update((doc.id, first + i) for i, doc in enumerate(documents))
        self._bm25_stale = True

    def _apply_delete(self, doc_ids: Sequence[str]) -> None:
        self._dense.delete([self._live.pop(doc_id) for doc_id in doc_ids])
        self._bm25_stale = True

    def _all_vectors(self) -> np.ndarray:
        """Every slot's vector (deleted ones included), float32 (slots, dim)."""
        return np.concatenate([np.asarray(self._base_vectors), *self._added_vectors], axis=0)

    @property
    def count(self) -> int:
        """Live documents."""
        return len(self._live)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._live

    def document(self, doc_id: str) -> Document:
        """The live document ``doc_id`` (KeyError if absent or deleted)."""
        return self._docs[self._live[doc_id]]

    def vectors(self, doc_ids: Sequence[str]) -> np.ndarray:
        """The stored float32 unit vectors of the live documents ``doc_ids``, rows in that order
        (exactly what the embedder returned at indexing; KeyError if one is absent or deleted)."""
        slots = [self._live[d] for d in doc_ids]
        base = len(self._base_vectors)
        added = np.concatenate([self._base_vectors[:0], *self._added_vectors], axis=0)
        rows: list[np.ndarray] = [self._base_vectors[s] if s < base else added[s - base] for s in slots]
        return np.reshape(np.asarray(rows, dtype=np.float32), (len(slots), int(self.manifest["embedder"]["dim"])))

    def seq(self, doc_id: str) -> int:
        """The live document's insertion number: its slot, or in a shard its corpus-wide number."""
        return self._seqs[self._live[doc_id]]

    @property
    def next_seq(self) -> int:
        """One more than the largest insertion number held (deleted slots included)."""
        return max(self._seqs, default=-1) + 1

    def live_texts(self) -> list[str]:
        """``full_text`` of every live document, in slot order."""
        return [self._docs[s].full_text for s in sorted(self._live.values())]

    def set_bm25_stats(self, stats: Bm25Stats) -> None:
        """Score this shard's BM25 with the corpus-wide ``stats`` from now on (rebuilt on the next
        BM25 search unless the index was already scored with exactly these statistics)."""
        if self.shard is None:
            raise ValueError(f"index {self.root} is not a shard: its BM25 uses its own statistics")
        with self._mutex:
            self._bm25_stats = stats
            if stats.digest() != self._bm25_scored_with:
                self._bm25_stale = True

    def _shard_bm25_stats(self) -> Bm25Stats | None:
        """The statistics to score with: None (own) for an unsharded index; a shard's corpus-wide ones."""
        if self.shard is None:
            return None
        if self._bm25_stats is None:
            raise ValueError(f"shard {self.root} needs the corpus-wide BM25 statistics (open it via the sharded index)")
        return self._bm25_stats

    def _hits(self, slots: np.ndarray, scores: np.ndarray) -> Hits:
        keep = slots >= 0
        return Hits([self._docs[int(s)].id for s in slots[keep]], scores[keep])

    def encode_query(self, query: str) -> np.ndarray:
        """The query's unit vector, float32 (1, dim), embedded after the embedder's query prompt (the
        index's: the store checked them equal at load)."""
        if self.embedder is None:
            raise ValueError("dense and hybrid search need the index's embedder")
        return check_vectors(self.embedder.encode([query], prompt=self.embedder.query_prompt), 1, self.embedder.dim)

    def search(
        self,
        query: str,
        *,
        mode: Mode = "dense",
        depth: int = 100,
        rrf_k: float = DEFAULT_RRF_K,
        rrf_weights: tuple[float, float] = (1.0, 1.0),
        vector: np.ndarray | None = None,
    ) -> Candidates:
        """Top ``depth`` documents for ``query``.

        ``dense``: cosine of unit vectors via FAISS. ``bm25``: BM25 (documents with a positive score
        only). ``hybrid``: RRF (``rrf_k``, weights for (dense, bm25)) of the top ``depth`` of each.
        ``vector``: the query's unit vector (``dim`` float32 values) computed by the caller with the
        index's embedder (e.g. a batched embedding service); without it the store's embedder
        encodes ``query``.
        """
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
        if depth < 1:
            raise ValueError(f"depth must be ≥ 1, got {depth}")
        timings: dict[str, float] = {}
        dense = sparse = None
        if mode in ("dense", "hybrid"):
            if vector is None:
                started = time.perf_counter()
                vector = self.encode_query(query)
                timings["embed"] = time.perf_counter() - started
            else:
                try:
                    vector = check_vectors(np.reshape(vector, (1, -1)), 1, int(self.manifest["embedder"]["dim"]))
                except ValueError as exc:
                    raise ValueError(f"query vector: {exc}") from None
        with self._mutex:
            if mode in ("dense", "hybrid"):
                assert vector is not None  # encoded or checked above
                started = time.perf_counter()
                scores, slots = self._dense.search(vector, depth)
                dense = self._hits(slots[0], scores[0])
                timings["dense"] = time.perf_counter() - started
            if mode in ("bm25", "hybrid"):
                sparse = self._bm25_search(query, depth, timings)
        return final_candidates(mode, dense, sparse, depth, rrf_k, rrf_weights, timings)

    def _bm25_search(self, query: str, depth: int, timings: dict[str, float]) -> Hits:
        """BM25 search; first rebuilds the BM25 index over the live documents if mutations made it stale."""
        if self.bm25_settings is None:
            raise ValueError(f"index {self.root} was built without BM25 (--no-bm25)")
        if self._bm25_stale:
            started = time.perf_counter()
            slots = np.fromiter(sorted(self._live.values()), dtype=np.int64, count=len(self._live))
            stats = self._shard_bm25_stats()
            self._bm25 = Bm25Index.build([self._docs[int(s)].full_text for s in slots], slots, self.bm25_settings, stats)
            self._bm25_stale = False
            self._bm25_scored_with = None if stats is None else stats.digest()
            timings["bm25_refresh"] = time.perf_counter() - started
        assert self._bm25 is not None, "a BM25 index is loaded or rebuilt whenever BM25 settings exist"
        started = time.perf_counter()
        scores, slots = self._bm25.search(query, depth)
        timings["bm25"] = time.perf_counter() - started
        return Hits([self._docs[int(s)].id for s in slots], scores)

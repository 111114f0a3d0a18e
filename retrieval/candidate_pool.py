""":class:`CandidatePool`: the first-stage candidates of one query with their documents, what the
query pipeline (:mod:`retrieval.pipeline`) ranks and what a sharded index's scatter-gather
(:mod:`retrieval.shards.gather`) hands it; and :class:`StoredDocuments`, what a pool reads
from an index (the part of :class:`~retrieval.index.Index` it needs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from steadyrank.retrieval.corpus import Document

if TYPE_CHECKING:
    from steadyrank.retrieval.search import Candidates, Hits


class StoredDocuments(Protocol):
    """An index's stored documents and vectors, by id."""

    def document(self, doc_id: str) -> Document:
        """The live document ``doc_id`` (KeyError if absent or deleted)."""
        ...

    def vectors(self, doc_ids: Sequence[str]) -> np.ndarray:
        """The stored float32 unit vectors of the live documents ``doc_ids``, rows in that order."""
        ...


@dataclass(frozen=True)
class CandidatePool:
    """First-stage candidates of one query: the mode's list (``doc_ids``, ``scores``), the documents
    (``Document.full_text`` is what is reranked), the component lists and the store's timings (s);
    ``missing_shards``: shards of a sharded index that did not answer (partial results,
    :mod:`retrieval.shards.gather`)."""

    doc_ids: list[str]
    scores: np.ndarray
    documents: list[Document]
    dense: Hits | None
    sparse: Hits | None
    timings: dict[str, float]
    vectors: np.ndarray | None = None
    missing_shards: tuple[int, ...] = ()

    @classmethod
    def from_store(cls, store: StoredDocuments, candidates: Candidates, with_vectors: bool = False) -> CandidatePool:
        """The pool of ``candidates``; ``with_vectors``: also their stored float32 vectors (n, dim)."""
        docs = [store.document(d) for d in candidates.doc_ids]
        vectors = store.vectors(candidates.doc_ids) if with_vectors else None
        return cls(list(candidates.doc_ids), np.asarray(candidates.scores, dtype=np.float64), docs,
                   candidates.dense, candidates.sparse, dict(candidates.timings), vectors)

    @property
    def texts(self) -> list[str]:
        return [d.full_text for d in self.documents]

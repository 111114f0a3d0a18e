"""The one interface of a loaded index, single or sharded, and :func:`open_index`.

:class:`~retrieval.store.IndexStore` (one directory) and :class:`~retrieval.shards.sharded_index.ShardedIndex`
(shards searched by scatter-gather, merged exactly) both implement :class:`Index`; callers that
only search, read documents or apply changes take an ``Index``. Importing this module loads neither
FAISS nor bm25s (:func:`open_index` imports them when called).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from steadyrank.retrieval.candidate_pool import StoredDocuments
from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.layout import is_sharded
from steadyrank.retrieval.modes import Mode
from steadyrank.retrieval.protocols import Embedder

if TYPE_CHECKING:
    from collections.abc import Callable

    from steadyrank.retrieval.search import Candidates


class Index(StoredDocuments, Protocol):
    """A loaded index: search, read (:class:`~retrieval.candidate_pool.StoredDocuments`: ``document``,
    ``vectors``), and (opened writable) change it durably."""

    @property
    def count(self) -> int:
        """Live documents."""
        ...

    def __contains__(self, doc_id: object) -> bool: ...

    def search(
        self, query: str, *, mode: Mode = "dense", depth: int = 100, rrf_k: float = ...,
        rrf_weights: tuple[float, float] = (1.0, 1.0), vector: np.ndarray | None = None,
    ) -> Candidates:
        """Top ``depth`` documents for ``query`` (dense, BM25 or their RRF)."""
        ...

    def info(self) -> dict[str, Any]:
        """The manifest's summary and the live state (``live_count``, ``wal_records``, ``tombstones``…)."""
        ...

    def add(self, documents: Sequence[Document], *, batch_size: int = 256,
            on_progress: Callable[[int], object] | None = None) -> int:
        """Embed and add ``documents``; durable when this returns."""
        ...

    def delete(self, doc_ids: Iterable[str]) -> int:
        """Delete documents by id; durable when this returns."""
        ...

    def compact(self) -> dict[str, Any]:
        """Fold the write-ahead log(s) into new generation(s)."""
        ...

    def close(self) -> None:
        """Release files and the writer lock (idempotent)."""
        ...

    def __enter__(self) -> Index: ...

    def __exit__(self, *exc: object) -> None: ...


def open_index(path: str | Path, embedder: Embedder | None = None, *, writable: bool = False) -> Index:
    """The index at ``path``: a :class:`~retrieval.shards.sharded_index.ShardedIndex` if it is sharded, else an
    :class:`~retrieval.store.IndexStore`."""
    if is_sharded(path):
        from steadyrank.retrieval.shards.sharded_index import ShardedIndex

        return ShardedIndex.open(path, embedder, writable=writable)
    from steadyrank.retrieval.store import IndexStore

    return IndexStore.open(path, embedder, writable=writable)

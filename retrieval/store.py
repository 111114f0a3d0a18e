"""The durable index store: an index directory (:mod:`retrieval.generations`) loaded, verified and
kept up to date.

Loading verifies the manifest against ``CURRENT`` and every file against the manifest's SHA-256,
refuses an embedder whose ``model_id`` or ``dim`` differ from the manifest, and replays the live
generation's write-ahead log. Adds and deletes are appended to that log and fsynced before they are
applied or acknowledged (:mod:`retrieval.wal`: a failed append refuses further changes until the
index is reopened). Compaction writes a new generation holding only the live documents and swaps
``CURRENT`` (a failure refuses further changes until the index is reopened: the old log may no
longer be the live one).

The names callers import from here (``build_index``, ``Candidates``, ``IndexIntegrityError``…)
are re-exported from the modules that define them.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from steadyrank.retrieval.bm25 import Bm25Index, Bm25Settings
from steadyrank.retrieval.build import (
    ProgressCallback,
    ShardFacts,
    build_header,
    build_index,
    built_prompts,
    check_new_documents,
    check_vectors,
    embed_documents,
)
from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.dense import DenseIndex, DenseSettings
from steadyrank.retrieval.fsio import IndexWriteError, WriterLock
from steadyrank.retrieval.generations import (
    LOCK,
    WAL,
    IndexIntegrityError,
    doc_record,
    document_from_record,
    encode_vectors,
    read_current,
    remove_stale,
    verify_generation,
    write_generation,
)
from steadyrank.retrieval.modes import MODES
from steadyrank.retrieval.protocols import Embedder
from steadyrank.retrieval.search import Candidates, Hits, MemoryIndex
from steadyrank.retrieval.wal import WriteAheadLog, read_log

__all__ = [
    "MODES", "Candidates", "EmbedderMismatchError", "Hits", "IndexIntegrityError", "IndexStore", "build_index",
    "check_vectors", "embed_documents",
]


class EmbedderMismatchError(ValueError):
    """The index was built with a different embedder than the one offered."""


class IndexStore(MemoryIndex):
    """A loaded index: search it; with ``writable=True`` also add, delete and compact (durably).

    Thread-safe: one mutex serialises searches against mutations. Only one process may hold an
    index writable (an flock on ``DIR/LOCK``); any number may hold it read-only, each seeing the
    state at its load.
    """

    def __init__(self, root: Path, embedder: Embedder | None, writable: bool) -> None:
        self.root = root
        self.embedder = embedder
        self._mutex = threading.RLock()
        self._lock = WriterLock(root / LOCK) if writable else None
        self._wal: WriteAheadLog | None = None
        self._failure: str | None = None  # why writes are refused until reopened (a failed compaction)
        try:
            self._load()
        except BaseException:
            self.close()
            raise

    @classmethod
    def open(cls, path: str | Path, embedder: Embedder | None = None, *, writable: bool = False) -> IndexStore:
        """Load and verify the index at ``path``.

        ``embedder`` encodes queries (dense and hybrid search) and added documents; it must match
        the manifest's ``model_id`` and ``dim``. Without it only BM25 search, delete and compact work.
        """
        root = Path(path)
        if not root.is_dir():
            raise FileNotFoundError(f"no index directory at {root}")
        return cls(root, embedder, writable)

    def _load(self) -> None:
        """Load the live generation; retried when a concurrent writer replaced it mid-load (its files
        vanish under the reader: ``FileNotFoundError`` from Python, ``RuntimeError`` from FAISS, or a
        failed checksum of a file half-deleted)."""
        while True:
            name, digest = read_current(self.root)
            try:
                self._load_generation(self.root / name, digest)
                return
            except (OSError, RuntimeError, IndexIntegrityError):
                if read_current(self.root)[0] == name:
                    raise

    def _load_generation(self, gen: Path, digest: str) -> None:
        manifest = verify_generation(self.root, gen, digest)
        self._check_embedder(manifest)
        self.manifest = manifest
        self.generation = gen.name
        self.dense_settings = DenseSettings(**{k: v for k, v in manifest["dense"].items() if k != "metric"})
        self.bm25_settings = None if manifest["bm25"] is None else Bm25Settings(**manifest["bm25"])
        self._dense = DenseIndex.read(gen / "dense.faiss", self.dense_settings)
        self._base_vectors = np.load(gen / "embeddings.npy", mmap_mode="r")
        self._added_vectors: list[np.ndarray] = []
        with open(gen / "docs.jsonl", encoding="ascii") as handle:
            records = [json.loads(line) for line in handle]
        self._docs = [document_from_record(r) for r in records]
        self._seqs = [int(r.get("seq", slot)) for slot, r in enumerate(records)]
        self._live = {doc.id: slot for slot, doc in enumerate(self._docs)}
        self.shard: dict[str, Any] | None = manifest.get("shard")
        self._bm25 = None if self.bm25_settings is None else Bm25Index.load(gen / "bm25", self.bm25_settings)
        self._bm25_stale = False
        self._bm25_scored_with = None if self.shard is None else self.shard["bm25_stats"]
        records, valid_length = read_log(gen / WAL)
        for record in records:
            self._apply(record)
        self._wal_records = len(records)
        if self._lock is not None:
            remove_stale(self.root, keep=gen.name)
            self._wal = WriteAheadLog(gen / WAL, valid_length, next_seq=len(records) + 1)

    def _check_embedder(self, manifest: dict[str, Any]) -> None:
        if self.embedder is None:
            return
        built = manifest["embedder"]
        if built["model_id"] != self.embedder.model_id or built["dim"] != self.embedder.dim:
            raise EmbedderMismatchError(
                f"index {self.root} was built with embedder {built['model_id']!r} (dim {built['dim']}); "
                f"refusing to use it with {self.embedder.model_id!r} (dim {self.embedder.dim}): "
                "pass the embedder it was built with, or rebuild the index"
            )
        prompts = built_prompts(manifest)
        offered = {"query": self.embedder.query_prompt, "document": self.embedder.document_prompt}
        if prompts != offered:
            raise EmbedderMismatchError(
                f"index {self.root} was built with prompts {prompts} (documents after 'document', queries to "
                f"go after 'query'); the embedder applies {offered}: give the embedder the index's prompts "
                "(its `prompts` setting; `--embedder-prompts` on the command line), or rebuild the index"
            )

    def _writer(self) -> WriteAheadLog:
        if self._failure is not None:
            raise IndexWriteError(f"index {self.root}: {self._failure}; refusing further changes until it is reopened")
        if self._wal is None:
            raise ValueError(f"index {self.root} is open read-only; open it with writable=True to change it")
        return self._wal

    def add(
        self,
        documents: Sequence[Document],
        *,
        batch_size: int = 256,
        on_progress: ProgressCallback | None = None,
        seqs: Sequence[int] | None = None,
        vectors: np.ndarray | None = None,
    ) -> int:
        """Embed and add ``documents``; durable (fsynced to the write-ahead log) when this returns.

        Refuses ids already present (delete them first) and empty texts. Returns the count added.
        ``seqs``: the documents' corpus-wide insertion numbers, required by (and only by) a shard.
        ``vectors``: their vectors when the caller embedded them already (see :func:`build_index`).
        """
        if self.embedder is None:
            raise ValueError("adding documents needs the index's embedder")
        self._writer()
        documents = list(documents)
        if not documents:
            return 0
        check_new_documents(documents, self._live)
        if (seqs is None) != (self.shard is None) or (seqs is not None and len(seqs) != len(documents)):
            raise ValueError("a shard's additions need one seq per document, an unsharded index's none")
        if vectors is None:
            vectors = embed_documents(self.embedder, documents, batch_size=batch_size, on_progress=on_progress)
        else:
            vectors = check_vectors(vectors, len(documents), self.embedder.dim)
        with self._mutex:
            check_new_documents(documents, self._live)  # again: another thread may have added them
            records = [doc_record(d, None if seqs is None else int(seqs[i])) for i, d in enumerate(documents)]
            try:
                self._writer().append({"op": "add", "docs": records, **encode_vectors(vectors)})
            except IndexWriteError as exc:
                raise IndexWriteError(f"nothing was added: {exc}") from exc
            self._wal_records += 1
            self._apply_add(documents, vectors, seqs)
        return len(documents)

    def delete(self, doc_ids: Iterable[str]) -> int:
        """Delete documents by id; durable when this returns. Unknown ids are refused (nothing deleted)."""
        ids = list(dict.fromkeys(doc_ids))
        with self._mutex:
            wal = self._writer()
            unknown = [doc_id for doc_id in ids if doc_id not in self._live]
            if unknown:
                raise KeyError(f"not in the index: {', '.join(map(repr, unknown[:10]))}")
            if ids:
                try:
                    wal.append({"op": "delete", "ids": ids})
                except IndexWriteError as exc:
                    raise IndexWriteError(f"nothing was deleted: {exc}") from exc
                self._wal_records += 1
                self._apply_delete(ids)
        return len(ids)

    def compact(self) -> dict[str, Any]:
        """Fold the write-ahead log into a new generation holding only live documents (retrains IVF,
        rebuilds HNSW and BM25); returns the new manifest."""
        with self._mutex:
            old_wal = self._writer()
            if not self._live:
                raise ValueError("every document is deleted: nothing to compact into (build a new index instead)")
            started = time.perf_counter()
            slots = np.fromiter(sorted(self._live.values()), dtype=np.int64, count=len(self._live))
            documents = [self._docs[int(s)] for s in slots]
            vectors = self._all_vectors()[slots]
            dense = DenseIndex.build(vectors, self.dense_settings)
            bm25 = None
            if self.bm25_settings is not None:
                bm25 = Bm25Index.build([d.full_text for d in documents], np.arange(len(documents)), self.bm25_settings,
                                       self._shard_bm25_stats())
            header = build_header(
                self.manifest["embedder"], self.dense_settings, self.bm25_settings,
                len(documents), time.perf_counter() - started, "compact", self.manifest.get("skipped_empty", 0),
            )
            seqs = None
            if self.shard is not None:
                seqs = [self._seqs[int(s)] for s in slots]
                stats = None if self.bm25_settings is None else self._bm25_stats
                header["shard"] = ShardFacts(self.shard["index"], self.shard["of"], seqs, stats).header()
            try:
                write_generation(self.root, documents, vectors, dense, bm25, header, seqs)
                old_wal.close()
                self._wal = None
                self._load()
            except BaseException as exc:
                # The new generation may or may not be live: appending to the old log could put an
                # acknowledged change where no reader looks. Refuse every change until reopened.
                self._failure = f"compaction failed ({type(exc).__name__}: {exc})"
                raise
            return self.manifest

    def close(self) -> None:
        """Release the write-ahead log and the writer lock (idempotent)."""
        if self._wal is not None:
            self._wal.close()
            self._wal = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> IndexStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def info(self) -> dict[str, Any]:
        """Manifest plus the live state: count, generation, WAL records, deleted-but-not-compacted slots."""
        return {
            **{k: v for k, v in self.manifest.items() if k != "files"},
            "path": str(self.root),
            "generation_dir": self.generation,
            "live_count": self.count,
            "wal_records": self._wal_records,
            "tombstones": len(self._docs) - self.count,
            "files": self.manifest["files"],
        }


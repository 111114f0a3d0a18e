"""The durable index store: one directory holding a FAISS index, a BM25 index, the documents and a
manifest, updated by copy-on-write generations and a write-ahead log.

Layout of an index directory ``DIR``::

    DIR/CURRENT              "gen-000002 <sha256 of its manifest.json>\\n" — the live generation
    DIR/LOCK                 flock held by the one writer (pid inside, informational)
    DIR/gen-000002/
        manifest.json        format, embedder {model_id, dim}, dense settings (factory…), bm25
                             settings or null, count, built_at, build_seconds, files {name: sha256, bytes}
        dense.faiss          FAISS index; its ids are slots 0…count−1 (line order of docs.jsonl)
        embeddings.npy       float32 (count, dim) unit vectors, kept for compaction and re-training
        docs.jsonl           {"id", "title", "text", "metadata"} per slot
        bm25/                bm25s index and tokenizer vocabulary (absent with bm25 = null)
        wal.jsonl            write-ahead log of adds/deletes since this generation (see ``wal.py``)

Crash safety. A build or a compaction writes a complete generation into ``DIR/.tmp-*``, fsyncs it,
renames it to ``DIR/gen-N`` and then atomically replaces ``CURRENT``: until that replace the old
generation is live and untouched, after it the new one is complete. Adds and deletes are appended
to the live generation's ``wal.jsonl`` and fsynced before they are applied or acknowledged; loading
replays the log. Loading verifies the manifest against ``CURRENT`` and every file against the
manifest's SHA-256, and refuses an embedder whose ``model_id`` or ``dim`` differ from the manifest.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from steadyrank.retrieval.bm25 import Bm25Index, Bm25Settings, Bm25Stats
from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.dense import DenseIndex, DenseSettings
from steadyrank.retrieval.fsio import (
    IndexWriteError,
    WriterLock,
    atomic_write_bytes,
    fsync_dir,
    fsync_tree,
    make_dirs,
    sha256_bytes,
    sha256_file,
)
from steadyrank.retrieval.fusion import DEFAULT_RRF_K, reciprocal_rank_fusion
from steadyrank.retrieval.layout import CURRENT
from steadyrank.retrieval.modes import MODES, Mode
from steadyrank.retrieval.protocols import Embedder
from steadyrank.retrieval.wal import WriteAheadLog, read_log

FORMAT = "steadyrank-index"
FORMAT_VERSION = 1
LOCK = "LOCK"
MANIFEST = "manifest.json"
WAL = "wal.jsonl"
GENERATION_PREFIX = "gen-"
TMP_PREFIX = ".tmp-"
NORM_TOLERANCE = 1e-3



class IndexIntegrityError(ValueError):
    """The index directory fails verification (checksum, size, format); rebuild it."""


class EmbedderMismatchError(ValueError):
    """The index was built with a different embedder than the one offered."""


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


ProgressCallback = Callable[[int], None]


def embed_documents(
    embedder: Embedder,
    documents: Sequence[Document],
    *,
    batch_size: int = 256,
    on_progress: ProgressCallback | None = None,
) -> np.ndarray:
    """``embedder.encode`` over ``full_text`` in batches: float32 (n, dim), rows checked to be unit vectors.

    ``on_progress(n_done_in_batch)`` is called after every batch (drive a progress bar with it).
    """
    vectors = np.empty((len(documents), embedder.dim), dtype=np.float32)
    for start in range(0, len(documents), batch_size):
        chunk = documents[start : start + batch_size]
        vectors[start : start + len(chunk)] = check_vectors(
            embedder.encode([d.full_text for d in chunk], show_progress=False), len(chunk), embedder.dim
        )
        if on_progress is not None:
            on_progress(len(chunk))
    return vectors


def check_vectors(vectors: np.ndarray, n: int, dim: int) -> np.ndarray:
    """``vectors`` as float32 (n, dim) if every row is finite with L2 norm 1 ± 1e-3, else ValueError."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.shape != (n, dim):
        raise ValueError(f"embedder returned shape {matrix.shape}, expected {(n, dim)}")
    norms = np.linalg.norm(matrix, axis=1)
    if not np.all(np.isfinite(norms)) or np.any(np.abs(norms - 1.0) > NORM_TOLERANCE):
        raise ValueError("embedder returned vectors that are not finite unit vectors (L2-normalised)")
    return matrix


def _check_new_documents(documents: Sequence[Document], existing: Iterable[str] = ()) -> None:
    """Refuse duplicate ids (within ``documents`` or against ``existing``) and empty texts."""
    seen = set(existing)
    for doc in documents:
        if doc.id in seen:
            raise ValueError(f"document id {doc.id!r} is already in the index (or repeated in this batch)")
        if not doc.id or any(c.isspace() for c in doc.id):
            raise ValueError(f"document id {doc.id!r} is empty or contains whitespace")
        if not doc.text.strip():
            raise ValueError(f"document {doc.id!r} has an empty text")
        seen.add(doc.id)


def _encode_vectors(vectors: np.ndarray) -> dict[str, Any]:
    data = np.ascontiguousarray(vectors, dtype="<f4")
    return {"vectors": base64.b64encode(data.tobytes()).decode("ascii"), "shape": list(data.shape)}


def _decode_vectors(record: dict[str, Any]) -> np.ndarray:
    return np.frombuffer(base64.b64decode(record["vectors"]), dtype="<f4").reshape(record["shape"]).astype(np.float32)


def _doc_record(doc: Document, seq: int | None) -> dict[str, Any]:
    """A ``docs.jsonl``/WAL record; a shard's records also carry the document's ``seq``."""
    return doc.to_json() if seq is None else {**doc.to_json(), "seq": seq}


def _document(record: dict[str, Any]) -> Document:
    return Document(id=record["id"], text=record["text"], title=record["title"], metadata=record["metadata"])


def final_candidates(
    mode: Mode, dense: Hits | None, sparse: Hits | None, depth: int, rrf_k: float,
    rrf_weights: tuple[float, float], timings: dict[str, float],
) -> Candidates:
    """The mode's list from its component lists: dense, bm25, or their RRF (top ``depth``, timed as ``fuse``)."""
    if mode == "dense":
        return Candidates(dense.doc_ids, dense.scores, dense, None, timings)
    if mode == "bm25":
        return Candidates(sparse.doc_ids, sparse.scores, None, sparse, timings)
    started = time.perf_counter()
    ids, fused = reciprocal_rank_fusion([dense.doc_ids, sparse.doc_ids], k=rrf_k, weights=rrf_weights, limit=depth)
    timings["fuse"] = time.perf_counter() - started
    return Candidates(ids, fused, dense, sparse, timings)


# ----------------------------------------------------------------------------------------------
# Generations on disk


def _generation_numbers(root: Path) -> list[int]:
    numbers = []
    for entry in root.iterdir():
        if entry.name.startswith(GENERATION_PREFIX) and entry.name[len(GENERATION_PREFIX) :].isdigit():
            numbers.append(int(entry.name[len(GENERATION_PREFIX) :]))
    return numbers


def _read_current(root: Path) -> tuple[str, str]:
    """``(generation directory name, manifest sha256)`` from ``CURRENT``."""
    pointer = root / CURRENT
    if not pointer.is_file():
        raise FileNotFoundError(f"{root} holds no steadyrank index (no {CURRENT} file; was its build interrupted?)")
    parts = pointer.read_text(encoding="ascii").split()
    if len(parts) != 2 or not parts[0].startswith(GENERATION_PREFIX):
        raise IndexIntegrityError(f"{pointer} is malformed: {pointer.read_text(errors='replace')!r}")
    return parts[0], parts[1]


def _check_target(root: Path, overwrite: bool) -> None:
    """Refuse to build into a non-index directory, or over an index without ``overwrite``."""
    if root.exists() and not root.is_dir():
        raise ValueError(f"{root} exists and is not a directory")
    if not root.exists():
        return
    foreign = [
        e.name for e in root.iterdir()
        if e.name not in (CURRENT, LOCK) and not e.name.startswith((GENERATION_PREFIX, TMP_PREFIX, f".{CURRENT}."))
    ]
    if foreign:
        raise ValueError(f"{root} exists and is not a steadyrank index (it holds {sorted(foreign)[:3]}…)")
    if (root / CURRENT).exists() and not overwrite:
        raise ValueError(f"{root} already holds an index; pass overwrite (--overwrite) to replace it")


def _remove_stale(root: Path, keep: str) -> None:
    """Delete every generation but ``keep`` and every leftover temporary directory (writer only)."""
    for entry in root.iterdir():
        if entry.is_dir() and entry.name != keep and entry.name.startswith((GENERATION_PREFIX, TMP_PREFIX)):
            shutil.rmtree(entry, ignore_errors=True)


def _write_generation(
    root: Path,
    documents: Sequence[Document],
    vectors: np.ndarray,
    dense: DenseIndex,
    bm25: Bm25Index | None,
    header: dict[str, Any],
    seqs: Sequence[int] | None = None,
) -> str:
    """Write a complete generation next to the live one and make it live; returns its name.

    Order: files → fsync → rename ``.tmp-*`` to ``gen-N`` → fsync ``root`` → replace ``CURRENT``.
    A crash before the replace leaves the previous generation live; after it, the new one.
    """
    number = max(_generation_numbers(root), default=0) + 1
    tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=root))
    dense.write(tmp / "dense.faiss")
    np.save(tmp / "embeddings.npy", np.ascontiguousarray(vectors, dtype=np.float32))
    with open(tmp / "docs.jsonl", "w", encoding="ascii") as handle:
        for i, doc in enumerate(documents):
            handle.write(json.dumps(_doc_record(doc, None if seqs is None else int(seqs[i]))) + "\n")
    if bm25 is not None:
        bm25.save(tmp / "bm25")
    files = {
        path.relative_to(tmp).as_posix(): {"sha256": sha256_file(path), "bytes": path.stat().st_size}
        for path in sorted(tmp.rglob("*"))
        if path.is_file()
    }
    manifest = {**header, "format": FORMAT, "format_version": FORMAT_VERSION, "generation": number, "files": files}
    manifest_bytes = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("ascii")
    (tmp / MANIFEST).write_bytes(manifest_bytes)
    fsync_tree(tmp)
    name = f"{GENERATION_PREFIX}{number:06d}"
    os.rename(tmp, root / name)
    fsync_dir(root)
    atomic_write_bytes(root / CURRENT, f"{name} {sha256_bytes(manifest_bytes)}\n".encode("ascii"))
    _remove_stale(root, keep=name)
    return name


def _header(
    embedder_id: str, dim: int, dense: DenseSettings, bm25: Bm25Settings | None, count: int, seconds: float,
    origin: str, skipped_empty: int,
) -> dict[str, Any]:
    return {
        "embedder": {"model_id": embedder_id, "dim": dim},
        "dense": {**asdict(dense), "metric": "inner_product"},
        "bm25": None if bm25 is None else bm25.to_json(),
        "count": count,
        "skipped_empty": skipped_empty,
        "origin": origin,
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "build_seconds": round(seconds, 3),
    }


def build_index(
    path: str | Path,
    documents: Sequence[Document],
    embedder: Embedder,
    *,
    dense: DenseSettings = DenseSettings(),
    bm25: Bm25Settings | None = Bm25Settings(),
    batch_size: int = 256,
    on_progress: ProgressCallback | None = None,
    overwrite: bool = False,
    skipped_empty: int = 0,
    shard: ShardFacts | None = None,
    vectors: np.ndarray | None = None,
) -> dict[str, Any]:
    """Embed ``documents``, build the FAISS (and BM25) index and write it as the live generation of
    ``path``; returns the manifest. A previous index at ``path`` stays live until the very end.

    ``vectors``: the documents' vectors (row i for ``documents[i]``) when the caller embedded them
    already; a sharded build embeds the whole corpus in one pass so that every vector equals the
    unsharded build's bit for bit (a vector depends, by float rounding, on the batch it was
    embedded in).

    ``skipped_empty`` is the number of empty corpus documents the caller left out; the manifest
    records it (``skipped_empty``) and compaction carries it over.

    ``shard``: build one shard of a sharded index (``retrieval.shards``): BM25 scored with the whole
    corpus' statistics, each document recorded with its corpus-wide insertion number ``seq``."""
    root = Path(path)
    if not documents:
        raise ValueError("no documents to index")
    _check_new_documents(documents)
    _check_target(root, overwrite)
    make_dirs(root)
    lock = WriterLock(root / LOCK)
    try:
        _check_target(root, overwrite)  # re-check under the lock
        started = time.perf_counter()
        if vectors is None:
            vectors = embed_documents(embedder, documents, batch_size=batch_size, on_progress=on_progress)
        else:
            vectors = check_vectors(vectors, len(documents), embedder.dim)
        dense_index = DenseIndex.build(vectors, dense)
        slots = np.arange(len(documents))
        stats = None if shard is None else shard.bm25_stats
        bm25_index = None if bm25 is None else Bm25Index.build([d.full_text for d in documents], slots, bm25, stats)
        header = _header(
            embedder.model_id, embedder.dim, dense, bm25, len(documents), time.perf_counter() - started, "build",
            skipped_empty,
        )
        if shard is not None:
            header["shard"] = shard.header()
        name = _write_generation(root, documents, vectors, dense_index, bm25_index, header,
                                 None if shard is None else shard.seqs)
    finally:
        lock.release()
    return json.loads((root / name / MANIFEST).read_text(encoding="ascii"))


@dataclass(frozen=True)
class ShardFacts:
    """What a shard's build records: its number, the shard count, its documents' ``seqs`` and the
    corpus-wide BM25 statistics its BM25 index is scored with (None without BM25)."""

    index: int
    of: int
    seqs: Sequence[int]
    bm25_stats: Bm25Stats | None

    def header(self) -> dict[str, Any]:
        digest = None if self.bm25_stats is None else self.bm25_stats.digest()
        return {"index": self.index, "of": self.of, "bm25_stats": digest}


# ----------------------------------------------------------------------------------------------
# The loaded store


class IndexStore:
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

    # -- loading -------------------------------------------------------------------------------

    def _load(self) -> None:
        """Load the live generation; retried when a concurrent writer replaced it mid-load (its files
        vanish under the reader: ``FileNotFoundError`` from Python, ``RuntimeError`` from FAISS, or a
        failed checksum of a file half-deleted)."""
        while True:
            name, digest = _read_current(self.root)
            try:
                self._load_generation(self.root / name, digest)
                return
            except (OSError, RuntimeError, IndexIntegrityError):
                if _read_current(self.root)[0] == name:
                    raise

    def _load_generation(self, gen: Path, digest: str) -> None:
        manifest_bytes = (gen / MANIFEST).read_bytes()
        if sha256_bytes(manifest_bytes) != digest:
            raise IndexIntegrityError(
                f"{gen / MANIFEST}: checksum does not match {self.root / CURRENT}; rebuild the index"
            )
        manifest = json.loads(manifest_bytes)
        if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
            raise IndexIntegrityError(
                f"{gen}: unsupported index format {manifest.get('format')!r} v{manifest.get('format_version')!r}"
            )
        for relative, expected in manifest["files"].items():
            path = gen / relative
            if not path.is_file():
                raise IndexIntegrityError(f"{path}: missing (listed in the manifest); rebuild the index")
            size = path.stat().st_size
            if size != expected["bytes"] or sha256_file(path) != expected["sha256"]:
                raise IndexIntegrityError(
                    f"{path}: checksum mismatch ({size} bytes, manifest says {expected['bytes']}); "
                    "the index is corrupt: rebuild it"
                )
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
        self._docs = [_document(r) for r in records]
        self._seqs = [int(r.get("seq", slot)) for slot, r in enumerate(records)]
        self._live = {doc.id: slot for slot, doc in enumerate(self._docs)}
        self.shard: dict[str, Any] | None = manifest.get("shard")
        self._bm25 = None if self.bm25_settings is None else Bm25Index.load(gen / "bm25", self.bm25_settings)
        self._bm25_stale = False
        self._bm25_scored_with = None if self.shard is None else self.shard["bm25_stats"]
        self._bm25_stats: Bm25Stats | None = getattr(self, "_bm25_stats", None)
        records, valid_length = read_log(gen / WAL)
        for record in records:
            self._apply(record)
        self._wal_records = len(records)
        if self._lock is not None:
            _remove_stale(self.root, keep=gen.name)
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

    # -- mutations -----------------------------------------------------------------------------

    def _apply(self, record: dict[str, Any]) -> None:
        """Apply one WAL record to the in-memory state (replay and live mutations share this)."""
        if record["op"] == "add":
            seqs = [d["seq"] for d in record["docs"]] if self.shard is not None else None
            self._apply_add([_document(d) for d in record["docs"]], _decode_vectors(record), seqs)
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
        _check_new_documents(documents, self._live)
        if (seqs is None) != (self.shard is None) or (seqs is not None and len(seqs) != len(documents)):
            raise ValueError("a shard's additions need one seq per document, an unsharded index's none")
        if vectors is None:
            vectors = embed_documents(self.embedder, documents, batch_size=batch_size, on_progress=on_progress)
        else:
            vectors = check_vectors(vectors, len(documents), self.embedder.dim)
        with self._mutex:
            _check_new_documents(documents, self._live)  # again: another thread may have added them
            records = [_doc_record(d, None if seqs is None else int(seqs[i])) for i, d in enumerate(documents)]
            try:
                self._writer().append({"op": "add", "docs": records, **_encode_vectors(vectors)})
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
            documents = [self._docs[s] for s in slots]
            vectors = self._all_vectors()[slots]
            dense = DenseIndex.build(vectors, self.dense_settings)
            bm25 = None
            if self.bm25_settings is not None:
                bm25 = Bm25Index.build([d.full_text for d in documents], np.arange(len(documents)), self.bm25_settings,
                                       self._shard_bm25_stats())
            built = self.manifest["embedder"]
            header = _header(
                built["model_id"], built["dim"], self.dense_settings, self.bm25_settings,
                len(documents), time.perf_counter() - started, "compact", self.manifest.get("skipped_empty", 0),
            )
            seqs = None
            if self.shard is not None:
                seqs = [self._seqs[s] for s in slots]
                stats = None if self.bm25_settings is None else self._bm25_stats
                header["shard"] = ShardFacts(self.shard["index"], self.shard["of"], seqs, stats).header()
            try:
                _write_generation(self.root, documents, vectors, dense, bm25, header, seqs)
                old_wal.close()
                self._wal = None
                self._load()
            except BaseException as exc:
                # The new generation may or may not be live: appending to the old log could put an
                # acknowledged change where no reader looks. Refuse every change until reopened.
                self._failure = f"compaction failed ({type(exc).__name__}: {exc})"
                raise
            return self.manifest

    def _all_vectors(self) -> np.ndarray:
        """Every slot's vector (deleted ones included), float32 (slots, dim)."""
        return np.concatenate([np.asarray(self._base_vectors), *self._added_vectors], axis=0)

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

    # -- reading -------------------------------------------------------------------------------

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
        added = np.concatenate(self._added_vectors, axis=0) if any(s >= base for s in slots) else None
        rows = [self._base_vectors[s] if s < base else added[s - base] for s in slots]
        return np.asarray(rows, dtype=np.float32).reshape(len(slots), int(self.manifest["embedder"]["dim"]))

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
        return Hits([self._docs[s].id for s in slots[keep]], scores[keep])

    def encode_query(self, query: str) -> np.ndarray:
        """The query's unit vector, float32 (1, dim)."""
        if self.embedder is None:
            raise ValueError("dense and hybrid search need the index's embedder")
        return check_vectors(self.embedder.encode([query]), 1, self.embedder.dim)

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
            self._bm25 = Bm25Index.build([self._docs[s].full_text for s in slots], slots, self.bm25_settings, stats)
            self._bm25_stale = False
            self._bm25_scored_with = None if stats is None else stats.digest()
            timings["bm25_refresh"] = time.perf_counter() - started
        started = time.perf_counter()
        scores, slots = self._bm25.search(query, depth)
        timings["bm25"] = time.perf_counter() - started
        return Hits([self._docs[s].id for s in slots], scores)

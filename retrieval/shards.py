"""A sharded index: N ordinary index directories under one parent, searched by scatter-gather.

Layout of a sharded index directory ``DIR``::

    DIR/SHARDS.json        {"format": "steadyrank-sharded-index", "format_version": 1, "shards": N,
                            "assignment": "sha256-mod", "set": "set-000002",
                            "dirs": ["set-000002/shard-000", …], "stats": "set-000002/bm25-stats.json"}
                           — the pointer to the live set, replaced atomically
    DIR/LOCK               flock of the one writer of the whole sharded index
    DIR/set-000002/        one build's shards:
        bm25-stats.json    corpus-wide BM25 statistics and the shard states they were computed from
        shard-000/ …       ordinary index directories (``retrieval.store``) whose manifests say "shard"

(Indexes written before sets existed name ``dirs: ["shard-000", …]`` and no ``stats``: their
statistics are ``DIR/bm25-stats.json``; they load unchanged.)

Atomic build and overwrite. A build writes a complete new set beside the live one (each shard
fsynced, its directory entries too), then atomically replaces ``SHARDS.json``: until that replace
the old set is live and untouched, after it the new one is complete, whatever the shard count of
either. Sets that ``SHARDS.json`` does not name (a build cut part-way, the set it replaced) are
deleted by the next writer.

Assignment (stable, documented): document ``id`` lives in shard
``int.from_bytes(sha256(id as UTF-8)[:8], "big") mod N``; it never depends on the other documents.

Exact merge. Every shard answers its own top ``depth`` (dense, BM25, or both for hybrid); the
gathered lists are merged by score descending, equal scores by ``seq`` ascending (the document's
corpus-wide insertion number, which is its slot in the equivalent unsharded index), cut to
``depth``. The global top ``depth`` is always inside the union of the shards' top ``depth``, so for
Flat (and for BM25) the merged list equals the unsharded index's — ids, scores and order. BM25
scores equal the unsharded ones because every shard is scored with the corpus-wide N, df and avgdl
(:class:`~steadyrank.retrieval.bm25.Bm25Stats`); hybrid fuses the merged lists with the same RRF.
Approximate indexes (HNSW, IVF) are merged the same way; their recall is that of each shard.

Durability. Adds and deletes go to the owning shard's write-ahead log (fsynced before returning,
see ``retrieval.store``); the corpus-wide statistics are then rewritten atomically with the shard
states they reflect. A crash between the two leaves statistics that no longer match the shards:
a reader refuses them, a writer recomputes them on open. A batch spanning several shards is
durable shard by shard (a crash in between keeps the shards already written).

Deadlines. :func:`scatter_gather` waits ``timeout_s`` for all shards; a shard that fails or does not
answer in time raises :class:`ShardUnavailableError`, or with ``partial_ok`` the others' answers are
merged and the missing shards reported — documents are never dropped silently.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import time
from collections.abc import Awaitable, Callable, Generator, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from steadyrank.retrieval.bm25 import Bm25Settings, Bm25Stats
from steadyrank.retrieval.build import ProgressCallback, ShardFacts, build_index, check_new_documents, embed_documents
from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.dense import DenseSettings
from steadyrank.retrieval.fsio import IndexWriteError, WriterLock, atomic_write_bytes, fsync_dir, make_dirs
from steadyrank.retrieval.fusion import DEFAULT_RRF_K
from steadyrank.retrieval.generations import LOCK, WAL, IndexIntegrityError
from steadyrank.retrieval.index import open_index as open_index  # re-exported: the import path callers used
from steadyrank.retrieval.layout import CURRENT, SHARDS_MANIFEST, is_sharded
from steadyrank.retrieval.modes import Mode
from steadyrank.retrieval.pipeline import CandidatePool
from steadyrank.retrieval.protocols import Embedder
from steadyrank.retrieval.search import Candidates, Hits, final_candidates
from steadyrank.retrieval.store import IndexStore
from steadyrank.retrieval.wal import read_log

STATS_FILE = "bm25-stats.json"
SET_PREFIX = "set-"
FORMAT = "steadyrank-sharded-index"
FORMAT_VERSION = 1


class ShardUnavailableError(RuntimeError):
    """A shard failed or missed its deadline and partial results are not allowed."""


def shard_of(doc_id: str, shards: int) -> int:
    """The shard owning ``doc_id``: ``int.from_bytes(sha256(doc_id)[:8], "big") mod shards``."""
    return int.from_bytes(hashlib.sha256(doc_id.encode("utf-8")).digest()[:8], "big") % shards


def shard_dir(index: int) -> str:
    return f"shard-{index:03d}"


def read_shards_manifest(path: str | Path) -> dict[str, Any]:
    manifest = json.loads((Path(path) / SHARDS_MANIFEST).read_text(encoding="ascii"))
    if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
        raise IndexIntegrityError(f"{path}: unsupported sharded index format {manifest.get('format')!r}")
    return manifest


def _owned(name: str) -> bool:
    """Whether an entry of a sharded index directory is one the builder writes."""
    return (name in (SHARDS_MANIFEST, LOCK, STATS_FILE) or name.startswith((SET_PREFIX, "shard-"))
            or name.startswith(f".{SHARDS_MANIFEST}.tmp-"))


def _remove_unreferenced(root: Path, manifest: dict[str, Any]) -> None:
    """Delete every set (and pre-set shard directory or statistics file) ``manifest`` does not name:
    a build cut part-way, or the set a build replaced (writer only)."""
    named = {part.split("/")[0] for part in [*manifest["dirs"], manifest.get("stats", STATS_FILE)]}
    removed = False
    for entry in root.iterdir():
        if entry.name not in named and entry.name not in (SHARDS_MANIFEST, LOCK) and _owned(entry.name):
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed = True
    if removed:
        fsync_dir(root)


def _next_set(root: Path) -> str:
    numbers = [int(e.name[len(SET_PREFIX):]) for e in root.iterdir()
               if e.name.startswith(SET_PREFIX) and e.name[len(SET_PREFIX):].isdigit()]
    return f"{SET_PREFIX}{max(numbers, default=0) + 1:06d}"


def _stats_path(root: Path, manifest: dict[str, Any]) -> Path:
    return root / manifest.get("stats", STATS_FILE)


def _opened_consistently(root: Path, opener: Callable[[], Any]) -> Any:
    """``opener()``, retried when a concurrent build replaced ``SHARDS.json`` (and deleted the set it
    was reading) meanwhile; any other failure propagates."""
    while True:
        before = (root / SHARDS_MANIFEST).read_bytes()
        try:
            return opener()
        except (OSError, RuntimeError, IndexIntegrityError):
            if (root / SHARDS_MANIFEST).read_bytes() == before:
                raise


# ----------------------------------------------------------------------------------------------
# Scatter-gather: pure merge functions and the async gather


@dataclass(frozen=True)
class ShardHits:
    """One shard's ranked list: ids best first, their scores and their corpus-wide ``seqs``."""

    doc_ids: list[str]
    scores: np.ndarray
    seqs: list[int]


@dataclass(frozen=True)
class ShardAnswer:
    """One shard's answer to a search: its dense and/or BM25 top lists, the documents they name
    (for display and reranking), the shard's ``timings`` (s) and, when asked for, the documents'
    stored float32 ``vectors`` (stored-vector reranking, :mod:`retrieval.pipeline`)."""

    dense: ShardHits | None
    sparse: ShardHits | None
    documents: dict[str, Document]
    timings: dict[str, float] = field(default_factory=dict)
    vectors: dict[str, np.ndarray] | None = None


def merge_hits(parts: Sequence[ShardHits], depth: int) -> ShardHits:
    """The top ``depth`` of the union: score descending, equal scores by ``seq`` ascending."""
    ids = [i for p in parts for i in p.doc_ids]
    seqs = [q for p in parts for q in p.seqs]
    dtype = parts[0].scores.dtype if parts else np.float32
    scores = np.concatenate([np.asarray(p.scores, dtype=dtype) for p in parts]) if parts else np.zeros(0, dtype)
    order = np.lexsort((np.asarray(seqs, dtype=np.int64), -scores))[:depth]
    return ShardHits([ids[i] for i in order], scores[order], [seqs[i] for i in order])


@dataclass(frozen=True)
class Gathered:
    """Merged candidates plus what came back: ``documents`` (and ``vectors`` when asked for) of
    every candidate and the ``missing`` shards (non-empty only with partial results allowed)."""

    candidates: Candidates
    documents: dict[str, Document]
    missing: dict[int, str]
    vectors: dict[str, np.ndarray] | None = None

    @property
    def partial(self) -> bool:
        return bool(self.missing)

    def pool(self) -> CandidatePool:
        """The merged candidates as the pipeline's :class:`~retrieval.pipeline.CandidatePool`."""
        found = self.candidates
        vectors = None
        if self.vectors is not None:
            vectors = np.asarray([self.vectors[i] for i in found.doc_ids], dtype=np.float32)
        return CandidatePool(list(found.doc_ids), np.asarray(found.scores, dtype=np.float64),
                             [self.documents[i] for i in found.doc_ids], found.dense, found.sparse,
                             dict(found.timings), vectors, tuple(sorted(self.missing)))


def merge_answers(
    answers: Sequence[ShardAnswer], mode: Mode, depth: int, *, rrf_k: float = DEFAULT_RRF_K,
    rrf_weights: tuple[float, float] = (1.0, 1.0),
) -> tuple[Candidates, dict[str, Document]]:
    """Merge the shards' component lists (:func:`merge_hits`) and derive the mode's final list."""
    timings: dict[str, float] = {}
    for answer in answers:
        for stage, seconds in answer.timings.items():
            timings[stage] = max(timings.get(stage, 0.0), seconds)
    dense = sparse = None
    if mode in ("dense", "hybrid"):
        merged = merge_hits([a.dense for a in answers if a.dense is not None], depth)
        dense = Hits(merged.doc_ids, merged.scores)
    if mode in ("bm25", "hybrid"):
        merged = merge_hits([a.sparse for a in answers if a.sparse is not None], depth)
        sparse = Hits(merged.doc_ids, merged.scores)
    found = final_candidates(mode, dense, sparse, depth, rrf_k, rrf_weights, timings)
    documents: dict[str, Document] = {}
    for answer in answers:
        documents.update(answer.documents)
    return found, documents


async def scatter_gather(
    calls: Sequence[Callable[[], Awaitable[ShardAnswer]]],
    *,
    mode: Mode,
    depth: int,
    timeout_s: float,
    partial_ok: bool = False,
    rrf_k: float = DEFAULT_RRF_K,
    rrf_weights: tuple[float, float] = (1.0, 1.0),
) -> Gathered:
    """Call every shard at once (``calls[i]()`` answers for shard i), wait at most ``timeout_s``,
    merge exactly. A shard that raises or misses the deadline (not done by then, or ended by a
    deadline of its own: ``TimeoutError``) raises :class:`ShardUnavailableError` naming it, unless
    ``partial_ok`` (then it is listed in ``Gathered.missing``; all missing still raises)."""
    if not calls:
        raise ValueError("no shards to search")
    tasks = [asyncio.ensure_future(call()) for call in calls]
    _, pending = await asyncio.wait(tasks, timeout=timeout_s)
    for task in pending:
        task.cancel()
    missing: dict[int, str] = {}
    answers: list[ShardAnswer] = []
    for i, task in enumerate(tasks):
        failure = None if task in pending else task.exception()
        if task in pending or isinstance(failure, TimeoutError):
            missing[i] = f"no answer within {timeout_s:g} s"
        elif failure is not None:
            missing[i] = f"{type(failure).__name__}: {failure}"
        else:
            answers.append(task.result())
    if missing and (not partial_ok or not answers):
        detail = "; ".join(f"shard {i}: {why}" for i, why in sorted(missing.items()))
        raise ShardUnavailableError(f"{len(missing)} of {len(calls)} shards did not answer ({detail})")
    found, documents = merge_answers(answers, mode, depth, rrf_k=rrf_k, rrf_weights=rrf_weights)
    vectors: dict[str, np.ndarray] | None = None
    if answers and all(a.vectors is not None for a in answers):
        vectors = {i: v for a in answers if a.vectors is not None for i, v in a.vectors.items()}
    return Gathered(found, {i: documents[i] for i in found.doc_ids}, missing, vectors)


def answer_from_store(
    store: IndexStore, query: str, *, mode: Mode, depth: int, vector: np.ndarray | None = None,
    with_vectors: bool = False,
) -> ShardAnswer:
    """One shard's :class:`ShardAnswer` from its store (the component lists of ``mode``;
    ``with_vectors``: with the stored vectors of the documents named)."""
    found = store.search(query, mode=mode, depth=depth, vector=vector)

    def hits(h: Hits | None) -> ShardHits | None:
        return None if h is None else ShardHits(list(h.doc_ids), np.asarray(h.scores), [store.seq(i) for i in h.doc_ids])

    named = sorted(set(found.dense.doc_ids if found.dense else ()) | set(found.sparse.doc_ids if found.sparse else ()))
    vectors = dict(zip(named, store.vectors(named), strict=True)) if with_vectors else None
    return ShardAnswer(hits(found.dense), hits(found.sparse), {i: store.document(i) for i in named},
                       dict(found.timings), vectors)


# ----------------------------------------------------------------------------------------------
# Corpus-wide BM25 statistics on disk


def _shard_state(root: Path) -> list[Any]:
    """``[live generation, write-ahead-log records]`` of a shard directory, read from its files."""
    generation = (root / CURRENT).read_text(encoding="ascii").split()[0]
    return [generation, len(read_log(root / generation / WAL)[0])]


def _write_stats(path: Path, stats: Bm25Stats, state: dict[str, list[Any]]) -> None:
    body = {"stats": stats.to_json(), "state": state}
    atomic_write_bytes(path, (json.dumps(body, sort_keys=True) + "\n").encode("utf-8"))


def read_stats(path: Path) -> tuple[Bm25Stats, dict[str, list[Any]]] | None:
    """The statistics stored at ``path`` and the shard states they reflect (None if the file is missing)."""
    if not path.is_file():
        return None
    body = json.loads(path.read_text(encoding="utf-8"))
    return Bm25Stats.from_json(body["stats"]), body["state"]


def open_shard(path: str | Path, index: int, embedder: Embedder | None = None) -> IndexStore:
    """Open shard ``index`` of the sharded index at ``path`` read-only, with the corpus-wide BM25
    statistics (what one Retriever replica of a shard serves). Refuses statistics that do not match
    every shard's current state (open the sharded index writable once to recompute them)."""
    root = Path(path)
    return _opened_consistently(root, lambda: _open_shard(root, index, embedder))


def _open_shard(root: Path, index: int, embedder: Embedder | None) -> IndexStore:
    manifest = read_shards_manifest(root)
    if not 0 <= index < manifest["shards"]:
        raise ValueError(f"shard {index} out of range: {root} has {manifest['shards']} shards")
    store = IndexStore.open(root / manifest["dirs"][index], embedder)
    if store.bm25_settings is None:
        return store
    stored = read_stats(_stats_path(root, manifest))
    current = {name: _shard_state(root / name) for name in manifest["dirs"]}
    if stored is None or stored[1] != current:
        store.close()
        raise IndexIntegrityError(
            f"{_stats_path(root, manifest)}: the BM25 statistics do not match the shards' state (interrupted update?); "
            f"open the index writable once (e.g. `steadyrank index compact --index {root}`) to recompute them"
        )
    store.set_bm25_stats(stored[0])
    return store


# ----------------------------------------------------------------------------------------------
# Build


def build_sharded_index(
    path: str | Path,
    documents: Sequence[Document],
    embedder: Embedder,
    *,
    shards: int,
    dense: DenseSettings = DenseSettings(),
    bm25: Bm25Settings | None = Bm25Settings(),
    batch_size: int = 256,
    on_progress: ProgressCallback | None = None,
    overwrite: bool = False,
    skipped_empty: int = 0,
) -> dict[str, Any]:
    """Split ``documents`` by :func:`shard_of` into ``shards`` shard indexes under ``path`` and
    write the corpus-wide BM25 statistics and ``SHARDS.json`` (last); returns ``SHARDS.json``
    (``skipped_empty``: empty corpus documents the caller left out, recorded there).

    Every document is embedded once, in one pass over the corpus in corpus order (the batches of an
    unsharded build, so the vectors equal its own bit for bit), then handed to its shard's build.
    The shards are written into a new set beside the live one; the new index replaces the old one
    when ``SHARDS.json`` is replaced (atomically), and a failure before that leaves the old one
    intact (see the module's "Atomic build and overwrite").
    """
    if shards < 1:
        raise ValueError(f"shards must be ≥ 1, got {shards}")
    if not documents:
        raise ValueError("no documents to index")
    check_new_documents(documents)
    root = Path(path)
    _check_sharded_target(root, overwrite)
    groups: list[list[int]] = [[] for _ in range(shards)]
    for seq, doc in enumerate(documents):
        groups[shard_of(doc.id, shards)].append(seq)
    empty = [i for i, g in enumerate(groups) if not g]
    if empty:
        raise ValueError(f"{len(documents)} documents leave shard(s) {empty} of {shards} empty: use fewer shards")
    make_dirs(root)
    lock = WriterLock(root / LOCK)
    try:
        _check_sharded_target(root, overwrite)  # again, under the lock
        started = time.perf_counter()
        stats = None if bm25 is None else Bm25Stats.of_texts([d.full_text for d in documents], bm25)
        vectors = embed_documents(embedder, documents, batch_size=batch_size, on_progress=on_progress)
        new_set = _next_set(root)
        dirs = [f"{new_set}/{shard_dir(i)}" for i in range(shards)]
        for i, group in enumerate(groups):
            build_index(
                root / dirs[i], [documents[s] for s in group], embedder, dense=dense, bm25=bm25,
                shard=ShardFacts(i, shards, group, stats), vectors=vectors[group],
            )
        manifest = {
            "format": FORMAT, "format_version": FORMAT_VERSION, "shards": shards, "assignment": "sha256-mod",
            "set": new_set, "dirs": dirs, "stats": f"{new_set}/{STATS_FILE}", "count": len(documents),
            "skipped_empty": skipped_empty, "build_seconds": round(time.perf_counter() - started, 3),
        }
        if stats is not None:
            _write_stats(_stats_path(root, manifest), stats, {name: _shard_state(root / name) for name in dirs})
        atomic_write_bytes(root / SHARDS_MANIFEST, (json.dumps(manifest, indent=2) + "\n").encode("ascii"))
        _remove_unreferenced(root, manifest)
    finally:
        lock.release()
    return manifest


def _check_sharded_target(root: Path, overwrite: bool) -> None:
    """Refuse to build into a directory holding anything but a sharded index's own files, or over a
    sharded index without ``overwrite``."""
    if root.exists() and not root.is_dir():
        raise ValueError(f"{root} exists and is not a directory")
    if not root.exists():
        return
    foreign = sorted(e.name for e in root.iterdir() if not _owned(e.name))
    if foreign:
        raise ValueError(f"{root} exists and is not an empty directory or a sharded index (it holds {foreign[:3]}…)")
    if is_sharded(root) and not overwrite:
        raise ValueError(f"{root} exists and is a sharded index; pass overwrite (--overwrite) to replace it")


@contextmanager
def _partly_done(done: int, total: int, verb: str) -> Generator[None, None, None]:
    """Say how much of a batch spanning shards was durably done when one shard's write fails."""
    try:
        yield
    except IndexWriteError as exc:
        if not done:
            raise
        raise IndexWriteError(f"{done} of {total} documents were {verb} (durably, in other shards) and "
                              f"the rest were not: {exc.__cause__ or exc}") from exc


# ----------------------------------------------------------------------------------------------
# The loaded sharded index (every shard in this process: CLI, tests, small deployments)


class ShardedIndex:
    """All shards of a sharded index in one process, an :class:`~retrieval.index.Index` like :class:`IndexStore`: search
    (scatter-gather over the shards, exact merge), and with ``writable=True`` add, delete, compact."""

    def __init__(self, root: Path, embedder: Embedder | None, writable: bool) -> None:
        self.root = root
        self.embedder = embedder
        self._lock = WriterLock(root / LOCK) if writable else None
        self.shards: list[IndexStore] = []
        try:
            _opened_consistently(root, self._load)
            if self._lock is not None:
                _remove_unreferenced(root, self.manifest)
        except BaseException:
            self.close()
            raise

    def _load(self) -> None:
        """Read ``SHARDS.json`` and open every shard it names (closing any opened before a failure)."""
        for shard in self.shards:
            shard.close()
        self.shards = []
        self.manifest = read_shards_manifest(self.root)
        for name in self.manifest["dirs"]:
            self.shards.append(IndexStore.open(self.root / name, self.embedder, writable=self._lock is not None))
        self._local_stats: dict[int, Bm25Stats] = {}
        self._sync_stats(trust_file=True)

    @classmethod
    def open(cls, path: str | Path, embedder: Embedder | None = None, *, writable: bool = False) -> ShardedIndex:
        root = Path(path)
        if not is_sharded(root):
            raise FileNotFoundError(f"no sharded index at {root} (no {SHARDS_MANIFEST})")
        return cls(root, embedder, writable)

    @property
    def bm25_settings(self) -> Bm25Settings | None:
        return self.shards[0].bm25_settings

    def _states(self) -> dict[str, list[Any]]:
        return {name: [s.generation, s.info()["wal_records"]]
                for name, s in zip(self.manifest["dirs"], self.shards, strict=True)}

    def _sync_stats(self, *, trust_file: bool = False, changed: Iterable[int] = ()) -> None:
        """Give every shard the corpus-wide BM25 statistics: the stored ones if they match the shards'
        states (``trust_file``), else recomputed (shards in ``changed`` re-tokenised) and, when
        writable, stored atomically."""
        if self.bm25_settings is None:
            return
        stats_path = _stats_path(self.root, self.manifest)
        stored = read_stats(stats_path) if trust_file else None
        if stored is not None and stored[1] == self._states():
            stats = stored[0]
        else:
            for i in changed:
                self._local_stats.pop(i, None)
            for i, shard in enumerate(self.shards):
                if i not in self._local_stats:
                    self._local_stats[i] = Bm25Stats.of_texts(shard.live_texts(), self.bm25_settings)
            stats = Bm25Stats.total(self._local_stats[i] for i in range(len(self.shards)))
            if self._lock is not None:
                _write_stats(stats_path, stats, self._states())
        for shard in self.shards:
            shard.set_bm25_stats(stats)

    # -- reading -------------------------------------------------------------------------------

    @property
    def count(self) -> int:
        return sum(s.count for s in self.shards)

    def __contains__(self, doc_id: object) -> bool:
        return isinstance(doc_id, str) and doc_id in self.shards[shard_of(doc_id, len(self.shards))]

    def document(self, doc_id: str) -> Document:
        return self.shards[shard_of(doc_id, len(self.shards))].document(doc_id)

    def vectors(self, doc_ids: Sequence[str]) -> np.ndarray:
        """As :meth:`IndexStore.vectors`: the stored vectors of ``doc_ids``, each from its shard."""
        rows = [self.shards[shard_of(d, len(self.shards))].vectors([d])[0] for d in doc_ids]
        return np.reshape(np.asarray(rows, dtype=np.float32),
                          (len(rows), int(self.shards[0].manifest["embedder"]["dim"])))

    def search(
        self, query: str, *, mode: Mode = "dense", depth: int = 100, rrf_k: float = DEFAULT_RRF_K,
        rrf_weights: tuple[float, float] = (1.0, 1.0), vector: np.ndarray | None = None,
    ) -> Candidates:
        """As :meth:`IndexStore.search`, over every shard (the query embedded once)."""
        if mode in ("dense", "hybrid") and vector is None:
            vector = self.shards[0].encode_query(query)
        answers = [answer_from_store(s, query, mode=mode, depth=depth, vector=vector) for s in self.shards]
        return merge_answers(answers, mode, depth, rrf_k=rrf_k, rrf_weights=rrf_weights)[0]

    def info(self) -> dict[str, Any]:
        """``IndexStore.info``'s summary keys over all shards, plus ``shards`` (each shard's info)."""
        infos = [s.info() for s in self.shards]
        first = infos[0]
        return {
            "path": str(self.root), "generation_dir": f"{len(self.shards)} shards",
            "live_count": sum(i["live_count"] for i in infos), "wal_records": sum(i["wal_records"] for i in infos),
            "tombstones": sum(i["tombstones"] for i in infos), "embedder": first["embedder"],
            "dense": first["dense"], "bm25": first["bm25"], "assignment": self.manifest["assignment"],
            "shards": [{k: v for k, v in i.items() if k != "files"} for i in infos],
        }

    # -- mutations -----------------------------------------------------------------------------

    def add(
        self, documents: Sequence[Document], *, batch_size: int = 256, on_progress: ProgressCallback | None = None
    ) -> int:
        """Add ``documents`` to their owning shards (each durable when this returns); embedded in one
        pass, as an unsharded index embeds them (see :func:`build_sharded_index`)."""
        documents = list(documents)
        if self._lock is None:
            raise ValueError(f"index {self.root} is open read-only; open it with writable=True to change it")
        check_new_documents(documents, (d.id for d in documents if d.id in self))
        first = max(s.next_seq for s in self.shards)
        groups: dict[int, list[int]] = {}
        for position, doc in enumerate(documents):
            groups.setdefault(shard_of(doc.id, len(self.shards)), []).append(position)
        if self.embedder is None:
            raise ValueError("adding documents needs the index's embedder")
        vectors = embed_documents(self.embedder, documents, batch_size=batch_size, on_progress=on_progress)
        done = 0
        for i, positions in sorted(groups.items()):
            with _partly_done(done, len(documents), "added"):
                self.shards[i].add([documents[p] for p in positions], seqs=[first + p for p in positions],
                                   vectors=vectors[positions])
            done += len(positions)
        self._sync_stats(changed=groups)
        return len(documents)

    def delete(self, doc_ids: Iterable[str]) -> int:
        """Delete documents by id from their shards; unknown ids are refused (nothing deleted)."""
        ids = list(dict.fromkeys(doc_ids))
        if self._lock is None:
            raise ValueError(f"index {self.root} is open read-only; open it with writable=True to change it")
        unknown = [i for i in ids if i not in self]
        if unknown:
            raise KeyError(f"not in the index: {', '.join(map(repr, unknown[:10]))}")
        groups: dict[int, list[str]] = {}
        for doc_id in ids:
            groups.setdefault(shard_of(doc_id, len(self.shards)), []).append(doc_id)
        done = 0
        for i, group in sorted(groups.items()):
            with _partly_done(done, len(ids), "deleted"):
                self.shards[i].delete(group)
            done += len(group)
        self._sync_stats(changed=groups)
        return len(ids)

    def compact(self) -> dict[str, Any]:
        """Compact every shard (see :meth:`IndexStore.compact`); returns :meth:`info`."""
        for shard in self.shards:
            shard.compact()
        self._sync_stats()
        return self.info()

    def close(self) -> None:
        for shard in self.shards:
            shard.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> ShardedIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

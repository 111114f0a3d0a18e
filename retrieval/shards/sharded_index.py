"""A sharded index loaded: every shard in one process (:class:`ShardedIndex`: the CLI, tests, small
deployments), or one shard of it (:func:`open_shard`: what one served ``RetrieverShard`` holds).

Durability. Adds and deletes go to the owning shard's write-ahead log (fsynced before returning,
see ``retrieval.store``); the corpus-wide statistics are then rewritten atomically with the shard
states they reflect. A crash between the two leaves statistics that no longer match the shards:
a reader refuses them, a writer recomputes them on open. A batch spanning several shards is
durable shard by shard (a crash in between keeps the shards already written).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from steadyrank.retrieval.bm25 import Bm25Settings, Bm25Stats
from steadyrank.retrieval.build import ProgressCallback, check_new_documents, embed_documents
from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.fsio import IndexWriteError, WriterLock
from steadyrank.retrieval.fusion import DEFAULT_RRF_K
from steadyrank.retrieval.generations import LOCK, IndexIntegrityError
from steadyrank.retrieval.layout import SHARDS_MANIFEST, is_sharded
from steadyrank.retrieval.modes import Mode
from steadyrank.retrieval.protocols import Embedder
from steadyrank.retrieval.search import Candidates
from steadyrank.retrieval.shards.gather import answer_from_store, merge_answers
from steadyrank.retrieval.shards.on_disk import (
    opened_consistently,
    read_shards_manifest,
    read_stats,
    remove_unreferenced,
    shard_of,
    shard_state,
    stats_path,
    write_stats,
)
from steadyrank.retrieval.store import IndexStore


def open_shard(path: str | Path, index: int, embedder: Embedder | None = None) -> IndexStore:
    """Open shard ``index`` of the sharded index at ``path`` read-only, with the corpus-wide BM25
    statistics (what one Retriever replica of a shard serves). Refuses statistics that do not match
    every shard's current state (open the sharded index writable once to recompute them)."""
    root = Path(path)
    return opened_consistently(root, lambda: _open_shard(root, index, embedder))


def _open_shard(root: Path, index: int, embedder: Embedder | None) -> IndexStore:
    manifest = read_shards_manifest(root)
    if not 0 <= index < manifest["shards"]:
        raise ValueError(f"shard {index} out of range: {root} has {manifest['shards']} shards")
    store = IndexStore.open(root / manifest["dirs"][index], embedder)
    if store.bm25_settings is None:
        return store
    stored = read_stats(stats_path(root, manifest))
    current = {name: shard_state(root / name) for name in manifest["dirs"]}
    if stored is None or stored[1] != current:
        store.close()
        raise IndexIntegrityError(
            f"{stats_path(root, manifest)}: the BM25 statistics do not match the shards' state (interrupted update?); "
            f"open the index writable once (e.g. `steadyrank index compact --index {root}`) to recompute them"
        )
    store.set_bm25_stats(stored[0])
    return store


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


class ShardedIndex:
    """All shards of a sharded index in one process, an :class:`~retrieval.index.Index` like :class:`IndexStore`: search
    (scatter-gather over the shards, exact merge), and with ``writable=True`` add, delete, compact."""

    def __init__(self, root: Path, embedder: Embedder | None, writable: bool) -> None:
        self.root = root
        self.embedder = embedder
        self._lock = WriterLock(root / LOCK) if writable else None
        self.shards: list[IndexStore] = []
        try:
            opened_consistently(root, self._load)
            if self._lock is not None:
                remove_unreferenced(root, self.manifest)
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
        stats_file = stats_path(self.root, self.manifest)
        stored = read_stats(stats_file) if trust_file else None
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
                write_stats(stats_file, stats, self._states())
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
        pass, as an unsharded index embeds them (see :func:`~retrieval.shards.build.build_sharded_index`)."""
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

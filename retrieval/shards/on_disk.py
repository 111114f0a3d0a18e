"""The on-disk layout of a sharded index: ``SHARDS.json``, its sets of shards, the stable assignment
of documents to shards and the corpus-wide BM25 statistics file.

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

Assignment (stable, documented): document ``id`` lives in shard
``int.from_bytes(sha256(id as UTF-8)[:8], "big") mod N``; it never depends on the other documents.

Sets that ``SHARDS.json`` does not name (a build cut part-way, the set it replaced) are deleted by
the next writer (:func:`remove_unreferenced`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from steadyrank.retrieval.bm25 import Bm25Stats
from steadyrank.retrieval.fsio import atomic_write_bytes, fsync_dir
from steadyrank.retrieval.generations import LOCK, WAL, IndexIntegrityError
from steadyrank.retrieval.layout import CURRENT, SHARDS_MANIFEST
from steadyrank.retrieval.wal import read_log

STATS_FILE = "bm25-stats.json"
SET_PREFIX = "set-"
FORMAT = "steadyrank-sharded-index"
FORMAT_VERSION = 1

T = TypeVar("T")


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


def owned(name: str) -> bool:
    """Whether an entry of a sharded index directory is one the builder writes."""
    return (name in (SHARDS_MANIFEST, LOCK, STATS_FILE) or name.startswith((SET_PREFIX, "shard-"))
            or name.startswith(f".{SHARDS_MANIFEST}.tmp-"))


def remove_unreferenced(root: Path, manifest: dict[str, Any]) -> None:
    """Delete every set (and pre-set shard directory or statistics file) ``manifest`` does not name:
    a build cut part-way, or the set a build replaced (writer only)."""
    named = {part.split("/")[0] for part in [*manifest["dirs"], manifest.get("stats", STATS_FILE)]}
    removed = False
    for entry in root.iterdir():
        if entry.name not in named and entry.name not in (SHARDS_MANIFEST, LOCK) and owned(entry.name):
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed = True
    if removed:
        fsync_dir(root)


def next_set(root: Path) -> str:
    """The name of the set a new build writes: one past the highest set number under ``root``."""
    numbers = [int(e.name[len(SET_PREFIX):]) for e in root.iterdir()
               if e.name.startswith(SET_PREFIX) and e.name[len(SET_PREFIX):].isdigit()]
    return f"{SET_PREFIX}{max(numbers, default=0) + 1:06d}"


def stats_path(root: Path, manifest: dict[str, Any]) -> Path:
    return root / manifest.get("stats", STATS_FILE)


def opened_consistently(root: Path, opener: Callable[[], T]) -> T:
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
# Corpus-wide BM25 statistics on disk


def shard_state(root: Path) -> list[Any]:
    """``[live generation, write-ahead-log records]`` of a shard directory, read from its files."""
    generation = (root / CURRENT).read_text(encoding="ascii").split()[0]
    return [generation, len(read_log(root / generation / WAL)[0])]


def write_stats(path: Path, stats: Bm25Stats, state: dict[str, list[Any]]) -> None:
    """Store ``stats`` and the shard ``state`` they reflect at ``path``, atomically."""
    body = {"stats": stats.to_json(), "state": state}
    atomic_write_bytes(path, (json.dumps(body, sort_keys=True) + "\n").encode("utf-8"))


def read_stats(path: Path) -> tuple[Bm25Stats, dict[str, list[Any]]] | None:
    """The statistics stored at ``path`` and the shard states they reflect (None if the file is missing)."""
    if not path.is_file():
        return None
    body = json.loads(path.read_text(encoding="utf-8"))
    return Bm25Stats.from_json(body["stats"]), body["state"]

"""Building a sharded index: the corpus split by :func:`~retrieval.shards.on_disk.shard_of`, embedded
once, written as a new set of shards beside the live one.

Atomic build and overwrite. A build writes a complete new set beside the live one (each shard
fsynced, its directory entries too), then atomically replaces ``SHARDS.json``: until that replace
the old set is live and untouched, after it the new one is complete, whatever the shard count of
either. Sets that ``SHARDS.json`` does not name (a build cut part-way, the set it replaced) are
deleted by the next writer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from steadyrank.retrieval.bm25 import Bm25Settings, Bm25Stats
from steadyrank.retrieval.build import ProgressCallback, ShardFacts, build_index, check_new_documents, embed_documents
from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.dense import DenseSettings
from steadyrank.retrieval.fsio import WriterLock, atomic_write_bytes, make_dirs
from steadyrank.retrieval.generations import LOCK
from steadyrank.retrieval.layout import SHARDS_MANIFEST, is_sharded
from steadyrank.retrieval.protocols import Embedder
from steadyrank.retrieval.shards.on_disk import (
    FORMAT,
    FORMAT_VERSION,
    STATS_FILE,
    next_set,
    owned,
    remove_unreferenced,
    shard_dir,
    shard_of,
    shard_state,
    stats_path,
    write_stats,
)


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
    intact (see this module's "Atomic build and overwrite").
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
        new_set = next_set(root)
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
            write_stats(stats_path(root, manifest), stats, {name: shard_state(root / name) for name in dirs})
        atomic_write_bytes(root / SHARDS_MANIFEST, (json.dumps(manifest, indent=2) + "\n").encode("ascii"))
        remove_unreferenced(root, manifest)
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
    foreign = sorted(e.name for e in root.iterdir() if not owned(e.name))
    if foreign:
        raise ValueError(f"{root} exists and is not an empty directory or a sharded index (it holds {foreign[:3]}…)")
    if is_sharded(root) and not overwrite:
        raise ValueError(f"{root} exists and is a sharded index; pass overwrite (--overwrite) to replace it")

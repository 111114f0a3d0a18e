"""The files that mark an index directory, and the checks on them (no FAISS, bm25s or numba, so a
process that only asks *is there an index here?* stays light).

- ``DIR/CURRENT``: an unsharded index (:mod:`retrieval.store`) names its live generation there;
- ``DIR/SHARDS.json``: a sharded index (:mod:`retrieval.shards.on_disk`) lists its shards there.
"""

from __future__ import annotations

from pathlib import Path

CURRENT = "CURRENT"
SHARDS_MANIFEST = "SHARDS.json"


def is_sharded(path: str | Path) -> bool:
    """True if ``path`` holds a sharded index (a ``SHARDS.json``)."""
    return (Path(path) / SHARDS_MANIFEST).is_file()


def holds_index(path: str | Path) -> bool:
    """True if ``path`` holds an index (unsharded: ``CURRENT``; sharded: ``SHARDS.json``)."""
    return (Path(path) / CURRENT).is_file() or is_sharded(path)

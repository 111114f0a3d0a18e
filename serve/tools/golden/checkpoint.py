"""Durable build state: one JSON file per query under ``GOLDEN_DIR/.state``, replaced atomically.

``GOLDEN_DIR/.state/build.json`` holds the fingerprint of the build (settings, judge, indexes,
queries); a restart with a different fingerprint is refused. ``GOLDEN_DIR/.state/lock`` is the
running build's writer lock. ``GOLDEN_DIR/.state/q-000001.json``
holds query 1's state (pool, judge calls, grades, refinement). Every write is temp file + fsync +
rename (+ directory fsync), so a kill at any moment leaves either the previous or the next state.
Floats survive the JSON round trip exactly, so a resumed build computes what an uninterrupted one
would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from steadyrank.retrieval.fsio import atomic_write_bytes, make_dirs

STATE_DIR = ".state"
BUILD_FILE = "build.json"
LOCK_FILE = "lock"  # the build's writer lock (serve.tools.golden.build.lock_out_dir)


def dump(payload: Any) -> bytes:
    """Canonical JSON bytes (sorted keys, UTF-8, trailing newline)."""
    return (json.dumps(payload, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def write_json(path: Path, payload: Any) -> None:
    """Atomically replace ``path`` with ``payload`` as canonical JSON."""
    atomic_write_bytes(path, dump(payload))


class Checkpoint:
    """The state folder of one build."""

    def __init__(self, out_dir: Path) -> None:
        self.root = out_dir / STATE_DIR

    def open(self, fingerprint: dict[str, Any], *, overwrite: bool) -> None:
        """Create the folder, or resume it when its fingerprint matches (``overwrite`` discards it)."""
        build = self.root / BUILD_FILE
        if build.exists() and not overwrite:
            previous = json.loads(build.read_text(encoding="utf-8"))
            if previous != json.loads(dump(fingerprint)):
                raise ValueError(f"{self.root.parent} holds a build with other settings, judge, indexes or queries; "
                                 "use another directory or pass --overwrite to start over")
            return
        make_dirs(self.root)  # the output folder too, each new directory's parent fsynced
        for stale in self.root.glob("q-*.json"):
            stale.unlink()
        write_json(build, fingerprint)

    def _path(self, position: int) -> Path:
        return self.root / f"q-{position:06d}.json"

    def load(self, position: int) -> dict[str, Any] | None:
        path = self._path(position)
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    def save(self, position: int, state: dict[str, Any]) -> None:
        write_json(self._path(position), state)

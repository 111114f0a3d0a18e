"""The live judgments file: append-only JSONL, one judged (or failed) sample per line, fsynced.

Each :meth:`JudgmentStore.append` writes one whole line (``json`` + ``\\n``) with a single
``write`` on a file opened for appending, then ``fsync``: a crash mid-write loses at most that
last line, and leaves it torn (no newline at the end). :func:`read_records` skips such a torn
tail; opening the store for writing cuts it off first (:meth:`JudgmentStore.open`), so the next
line never glues onto it. A malformed line *before* the last one is not a torn write but damage,
and is refused with its line number.

A record (``v`` 1) holds ``day`` (its UTC date), ``status`` (``judged`` or ``failed``), ``route``
(``search``, ``rerank``), ``query``, ``served`` (per variant the judged ranking: doc ids best first;
a ``/v1/rerank`` document's id is ``sha256:`` + the SHA-256 of its text, so no passage text is
stored), ``grades`` (doc id → rubric grade 1–5), ``values`` (variant → measure → value), the
judge's ``calls`` (their audit records) and the cost: ``judge_calls`` (requests, retries included)
and ``tokens``. :func:`usage_by_day` sums the cost per day: on restart today's cap continues
from it.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from steadyrank.retrieval.fsio import fsync_dir, make_dirs

logger = logging.getLogger("steadyrank.quality")
VERSION = 1


class StoreDamagedError(ValueError):
    """A line before the last one of the judgments file is not a JSON object."""


def _scan(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The complete records of the file and the byte offset where the last of them ends. One bad line
    (not a JSON object, or without its newline) is tolerated at the end only: a torn write."""
    records: list[dict[str, Any]] = []
    end = 0
    bad: tuple[int, str] | None = None
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if bad is not None:  # a bad line with another after it: damage, not a torn tail
                raise StoreDamagedError(f"{path}:{bad[0]}: not a judgment record ({bad[1]})")
            try:
                record = json.loads(line)
            except ValueError as exc:
                bad = (number, str(exc))
                continue
            if not isinstance(record, dict) or not line.endswith(b"\n"):
                bad = (number, "not a JSON object" if not isinstance(record, dict) else "no newline")
                continue
            records.append(record)
            end += len(line)
    if bad is not None:
        logger.warning("%s: line %d is torn (a write cut short: %s); it is skipped", path, bad[0], bad[1])
    return records, end


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Every complete record of the file (none when it does not exist); a torn last line is skipped."""
    path = Path(path)
    return _scan(path)[0] if path.exists() else []


def usage_by_day(records: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """UTC day → (judge calls, tokens) the records of that day cost."""
    usage: dict[str, tuple[int, int]] = {}
    for record in records:
        calls, tokens = usage.get(str(record["day"]), (0, 0))
        usage[str(record["day"])] = (calls + int(record.get("judge_calls", 0)), tokens + int(record.get("tokens", 0)))
    return usage


class JudgmentStore:
    """The append side of one judgments file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()

    def open(self) -> list[dict[str, Any]]:
        """Create the file's folder, cut a torn last line off, and return the records already stored."""
        make_dirs(self.path.parent)
        if not self.path.exists():
            return []
        records, end = _scan(self.path)
        if end < self.path.stat().st_size:
            with self.path.open("r+b") as handle:
                handle.truncate(end)
                os.fsync(handle.fileno())
        return records

    def append(self, record: dict[str, Any]) -> None:
        """Append ``record`` as one line (one ``write``) and fsync it; the first line fsyncs the folder too."""
        line = (json.dumps({"v": VERSION, **record}, ensure_ascii=False, allow_nan=False, sort_keys=True) + "\n")
        new = not self.path.exists()
        with self.path.open("ab") as handle:
            handle.write(line.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        if new:
            fsync_dir(self.path.parent)

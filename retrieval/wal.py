"""Write-ahead log of index mutations: one self-checksummed JSON line per operation.

Record: ``{"seq": n, "op": "add" | "delete", ..., "sha256": hex}`` where ``sha256`` is the SHA-256
of the canonical JSON of the record without it (sorted keys, no spaces, ASCII). ``seq`` counts
1, 2, 3, … within one generation.

Durability: :meth:`WriteAheadLog.append` writes the whole line (terminated by ``\\n``) in one
``write`` and fsyncs before returning, so an acknowledged operation survives a crash. A process
killed inside ``append`` leaves at most one *torn* last line, recognisable by its missing newline:
it was never acknowledged, replay ignores it and the next writer truncates it. A complete line with
a bad checksum, or a gap in ``seq``, is corruption and refuses to load.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from steadyrank.retrieval.fsio import fsync_dir, sha256_bytes


class WalCorruptError(ValueError):
    """A complete WAL line fails its checksum or breaks the sequence."""


def _canonical(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def encode_record(record: dict[str, Any]) -> bytes:
    """``record`` plus its checksum, as one ``\\n``-terminated line."""
    body = dict(record)
    body["sha256"] = sha256_bytes(_canonical(record))
    return _canonical(body) + b"\n"


def read_log(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Replay ``path``: the valid records in order and the byte length of the valid prefix.

    A missing file is an empty log. A torn last line (no newline) is skipped; its bytes lie past
    the returned length.
    """
    if not path.exists():
        return [], 0
    data = path.read_bytes()
    records: list[dict[str, Any]] = []
    offset = 0
    while (end := data.find(b"\n", offset)) >= 0:  # a tail without newline is torn: never acknowledged
        number = len(records) + 1
        try:
            record = json.loads(data[offset:end])
            claimed = record.pop("sha256")
        except (ValueError, KeyError, AttributeError, TypeError):
            raise WalCorruptError(f"{path}: record {number}: unreadable write-ahead log line") from None
        if sha256_bytes(_canonical(record)) != claimed:
            raise WalCorruptError(f"{path}: record {number}: fails its checksum")
        if record.get("seq") != number:
            raise WalCorruptError(f"{path}: record {number}: expected seq {number}, found {record.get('seq')!r}")
        records.append(record)
        offset = end + 1
    return records, offset


class WriteAheadLog:
    """Appender for one generation's log; opened after :func:`read_log` validated it."""

    def __init__(self, path: Path, valid_length: int, next_seq: int) -> None:
        self.path = path
        existed = path.exists()
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.ftruncate(self._fd, valid_length)  # drop a torn tail before appending after it
        os.fsync(self._fd)
        if not existed:
            fsync_dir(path.parent)
        os.lseek(self._fd, valid_length, os.SEEK_SET)
        self.next_seq = next_seq

    def append(self, record: dict[str, Any]) -> int:
        """Durably append ``record`` (``seq`` is assigned here); returns its ``seq``."""
        seq = self.next_seq
        line = encode_record({**record, "seq": seq})
        written = 0
        while written < len(line):
            written += os.write(self._fd, line[written:])
        os.fsync(self._fd)
        self.next_seq += 1
        return seq

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

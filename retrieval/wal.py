"""Write-ahead log of index mutations: one self-checksummed JSON line per operation.

Record: ``{"seq": n, "op": "add" | "delete", ..., "sha256": hex}`` where ``sha256`` is the SHA-256
of the canonical JSON of the record without it (sorted keys, no spaces, ASCII). ``seq`` counts
1, 2, 3, … within one generation.

Durability: :meth:`WriteAheadLog.append` writes the whole line (terminated by ``\\n``) and fsyncs
before returning, so an acknowledged operation survives a crash. A failed append (short write,
ENOSPC, EIO, a failed fsync) truncates the file back to the end of the last acknowledged record
and leaves the log *failed*: every later append is refused with :class:`IndexWriteError` until the
index is reopened, so a record is never written after garbage and a ``seq`` is never reused.

Replay (:func:`read_log`): a process killed inside ``append`` leaves a *torn tail*: a last line
without its newline, or a last line whose checksum fails (a multi-page write cut part-way). It was
never acknowledged: replay drops it with a warning and the next writer truncates it. A bad line
followed by a good one, or a gap in ``seq``, is corruption and refuses to load.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from steadyrank.retrieval.fsio import IndexWriteError, fsync_dir, sha256_bytes

log = logging.getLogger(__name__)


class WalCorruptError(ValueError):
    """A WAL line followed by further lines fails its checksum, or the sequence breaks."""


def _canonical(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def encode_record(record: dict[str, Any]) -> bytes:
    """``record`` plus its checksum, as one ``\\n``-terminated line."""
    body = dict(record)
    body["sha256"] = sha256_bytes(_canonical(record))
    return _canonical(body) + b"\n"


def _decode_line(line: bytes) -> dict[str, Any] | None:
    """The record of one line without its ``sha256``, or None if unreadable or failing its checksum."""
    try:
        record: dict[str, Any] = json.loads(line)
        claimed = record.pop("sha256")
    except (ValueError, KeyError, AttributeError, TypeError):
        return None
    if sha256_bytes(_canonical(record)) != claimed:
        return None
    return record


def read_log(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Replay ``path``: the valid records in order and the byte length of the valid prefix.

    A missing file is an empty log. A torn tail (a last line without newline, or a last line that
    fails its checksum) is dropped with a warning; its bytes lie past the returned length.
    """
    if not path.exists():
        return [], 0
    data = path.read_bytes()
    records: list[dict[str, Any]] = []
    offset = 0
    while (end := data.find(b"\n", offset)) >= 0:
        number = len(records) + 1
        record = _decode_line(data[offset:end])
        if record is None:
            if end + 1 < len(data):  # good bytes follow: not a crash shape
                raise WalCorruptError(f"{path}: record {number}: unreadable or fails its checksum, and more records follow")
            break
        if record.get("seq") != number:
            raise WalCorruptError(f"{path}: record {number}: expected seq {number}, found {record.get('seq')!r}")
        records.append(record)
        offset = end + 1
    if offset < len(data):
        log.warning("%s: dropping a torn tail of %d bytes after record %d (a write cut by a crash; never acknowledged)",
                    path, len(data) - offset, len(records))
    return records, offset


class WriteAheadLog:
    """Appender for one generation's log; opened after :func:`read_log` validated it."""

    def __init__(self, path: Path, valid_length: int, next_seq: int) -> None:
        self.path = path
        existed = path.exists()
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.ftruncate(self._fd, valid_length)  # drop a torn tail before appending after it
            os.fsync(self._fd)
            if not existed:
                fsync_dir(path.parent)
        except BaseException:
            self.close()
            raise
        self._offset = valid_length
        self._failure: str | None = None
        self.next_seq = next_seq

    def append(self, record: dict[str, Any]) -> int:
        """Durably append ``record`` (``seq`` is assigned here); returns its ``seq``.

        Raises :class:`IndexWriteError` if the log failed before or fails now (then the file is
        truncated back to the last acknowledged record and the log refuses every later append)."""
        if self._failure is not None:
            raise IndexWriteError(f"{self.path}: an earlier write failed ({self._failure}); "
                                  "refusing further changes until the index is reopened")
        seq = self.next_seq
        line = encode_record({**record, "seq": seq})
        try:
            written = 0
            while written < len(line):
                written += os.pwrite(self._fd, line[written:], self._offset + written)
            os.fsync(self._fd)
        except OSError as exc:
            self._failure = exc.strerror or str(exc)
            self._truncate_back()
            raise IndexWriteError(f"{self.path}: could not write the write-ahead log ({self._failure}); "
                                  "the change was not made and this writer refuses further changes "
                                  "until the index is reopened") from exc
        self._offset += len(line)
        self.next_seq += 1
        return seq

    def _truncate_back(self) -> None:
        """Cut the file back to the last acknowledged record (best effort: replay drops a torn tail)."""
        try:
            os.ftruncate(self._fd, self._offset)
            os.fsync(self._fd)
        except OSError as exc:
            log.warning("%s: could not truncate a failed append back to %d bytes (%s); the next open drops it",
                        self.path, self._offset, exc)

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

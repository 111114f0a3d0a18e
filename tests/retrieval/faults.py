"""Fault injection for the storage tests: count, fail or cut short the I/O calls of the code under test.

A stand-in for a failing disk (a full disk, an I/O error, a failed fsync) that cannot be produced on
demand on the test machine. :class:`Faults` patches, for the duration of a ``with`` block:

- ``write``: ``os.write``, ``os.pwrite`` and the ``write(2)`` calls of every file opened for writing
  through ``open``/``io.open`` (numpy, bm25s, json, pathlib and FAISS — whose writer the index
  feeds through a Python file — all write that way; Python's buffering is kept, so the faults land
  on the system calls, not on each small ``write`` of a JSON encoder);
- ``fsync``: ``os.fsync``;
- ``rename``: ``os.rename`` and ``os.replace``.

Every call is counted per kind (``calls``); with ``kind``/``at`` set, call number ``at`` (0-based)
of that kind fails:

- ``"eio"``: raises ``OSError(EIO)``; later calls succeed;
- ``"full"`` (writes only): writes the first half of its bytes and returns short, and every later
  write raises ENOSPC — a disk that filled up mid-write.
"""

from __future__ import annotations

import builtins
import errno
import io
import os
from collections import Counter
from typing import Any

KINDS = ("write", "fsync", "rename")
MODES = {"write": ("eio", "full"), "fsync": ("eio",), "rename": ("eio",)}


class _FaultyRaw(io.RawIOBase):
    """An unbuffered file whose ``write`` (one ``write(2)``) goes through the injector; opened files
    wrap it in Python's own buffering, so faults land where the system calls are."""

    def __init__(self, raw: Any, faults: Faults) -> None:
        super().__init__()
        self._raw = raw
        self._faults = faults
        self.name = raw.name
        self.mode = raw.mode

    def write(self, data: Any) -> int:
        data = bytes(data)
        cut = self._faults.fault("write", len(data))
        return self._raw.write(data if cut is None else data[:cut])

    def readinto(self, buffer: Any) -> int:
        return self._raw.readinto(buffer)

    def readable(self) -> bool:
        return self._raw.readable()

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._raw.seekable()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def truncate(self, size: int | None = None) -> int:
        return self._raw.truncate(size)

    def fileno(self) -> int:
        return self._raw.fileno()

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


def _faulty_open(real_open: Any, faults: Faults, file: Any, mode: str, buffering: int = -1, encoding: str | None = None,
                 errors: str | None = None, newline: str | None = None, **kwargs: Any) -> Any:
    """``open`` of a file for writing, its writes through :class:`_FaultyRaw` (buffered as usual)."""
    raw = _FaultyRaw(real_open(file, mode.replace("t", "").replace("b", "") + "b", buffering=0, **kwargs), faults)
    size = buffering if buffering > 1 else io.DEFAULT_BUFFER_SIZE
    buffered = io.BufferedRandom(raw, size) if "+" in mode else io.BufferedWriter(raw, size)
    if "b" in mode:
        return buffered
    return io.TextIOWrapper(buffered, encoding=encoding or "utf-8", errors=errors, newline=newline)


class Faults:
    """Counts (and with ``kind``/``at``/``mode`` fails) the I/O calls made inside ``with faults:``."""

    def __init__(self, kind: str | None = None, at: int = -1, mode: str = "eio") -> None:
        assert kind is None or mode in MODES[kind], (kind, mode)
        self.kind, self.at, self.mode = kind, at, mode
        self.calls: Counter[str] = Counter()
        self.injected = False
        self._disk_full = False
        self._saved: list[tuple[Any, str, Any]] = []

    def fault(self, kind: str, size: int = 0) -> int | None:
        """Count one call of ``kind``; raise its fault, or for a write cut short return how many
        bytes to write (None: no fault)."""
        index = self.calls[kind]
        self.calls[kind] += 1
        if kind == "write" and self._disk_full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if kind != self.kind or index != self.at:
            return None
        self.injected = True
        if self.mode == "full":
            self._disk_full = True
            return size // 2
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    def _patch(self, owner: Any, name: str, replacement: Any) -> None:
        self._saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, replacement)

    def __enter__(self) -> Faults:
        real_write, real_pwrite, real_fsync = os.write, os.pwrite, os.fsync
        real_rename, real_replace, real_open = os.rename, os.replace, builtins.open

        def write(fd: int, data: bytes) -> int:
            cut = self.fault("write", len(data))
            return real_write(fd, data if cut is None else data[:cut])

        def pwrite(fd: int, data: bytes, offset: int) -> int:
            cut = self.fault("write", len(data))
            return real_pwrite(fd, data if cut is None else data[:cut], offset)

        def fsync(fd: Any) -> None:
            self.fault("fsync")
            real_fsync(fd)

        def rename(src: Any, dst: Any, **kwargs: Any) -> None:
            self.fault("rename")
            real_rename(src, dst, **kwargs)

        def replace(src: Any, dst: Any, **kwargs: Any) -> None:
            self.fault("rename")
            real_replace(src, dst, **kwargs)

        def open_(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            if isinstance(file, int) or not any(c in mode for c in "wax+"):
                return real_open(file, mode, *args, **kwargs)
            return _faulty_open(real_open, self, file, mode, *args, **kwargs)

        for name, fn in (("write", write), ("pwrite", pwrite), ("fsync", fsync), ("rename", rename), ("replace", replace)):
            self._patch(os, name, fn)
        self._patch(builtins, "open", open_)
        self._patch(io, "open", open_)
        return self

    def __exit__(self, *exc: object) -> None:
        while self._saved:
            owner, name, original = self._saved.pop()
            setattr(owner, name, original)

"""Durable file primitives: fsync, atomic replace, checksums, an exclusive writer lock.

A file or directory is durable once its bytes *and* the directory entry naming it are fsynced;
:func:`atomic_write_bytes` and :func:`fsync_dir` give exactly that.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
from pathlib import Path

CHUNK_BYTES = 1 << 20


class IndexLockedError(ValueError):
    """Another process holds the index's writer lock."""


class IndexWriteError(OSError):
    """A write to the index failed (disk full, I/O error, failed fsync): the change was not made
    (or, where the message says so, only partly), and the writer refuses further changes until the
    index is reopened."""


def fsync_dir(path: Path) -> None:
    """Flush ``path``'s directory entries (creations, renames, deletions inside it) to disk."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(path: Path) -> None:
    """``mkdir -p path``, fsyncing the parent of every directory it creates (so the new entries
    survive a crash)."""
    missing: list[Path] = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        directory.mkdir(exist_ok=True)
        fsync_dir(directory.parent)


def fsync_tree(root: Path) -> None:
    """fsync every file and directory under ``root`` (``root`` included), deepest first."""
    for directory, _, files in os.walk(root, topdown=False):
        for name in files:
            fd = os.open(Path(directory) / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(directory))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically: a reader sees the old or the new bytes, never a mix.
    A write that fails (a full disk) removes its temporary file; one killed mid-write leaves it behind
    (``.NAME.tmp-PID``) and ``path`` untouched."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


class WriterLock:
    """An exclusive, non-blocking ``flock`` on ``path`` held until :meth:`release` (or the end of a
    ``with`` block).

    The kernel drops the lock when the holder dies (SIGKILL included), so a crash never leaves a
    stale lock behind. The holder's pid is written into the file for the error message, which names
    ``folder`` (default: the lock file's folder) as the thing locked.
    """

    def __init__(self, path: Path, *, folder: Path | None = None) -> None:
        self.path = path
        self._fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(self._fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(self._fd)
            self._fd = None
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise IndexLockedError(
                    f"{path.parent if folder is None else folder} is locked for writing by another process "
                    f"(pid {holder}); only one writer at a time"
                ) from None
            raise
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, str(os.getpid()).encode(), 0)
        except OSError:
            self.release()  # a full disk: give the lock back rather than hold it on a leaked descriptor
            raise

    def __enter__(self) -> WriterLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        """Give the lock back (idempotent)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

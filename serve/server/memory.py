"""Hand memory that a forward pass freed back to the operating system.

glibc's malloc keeps freed blocks in per-thread arenas for reuse; forward batches allocate and free
tens of MB of activations on several threads (the compute thread and the forward lanes), so a model
replica's RSS climbs well past what it holds live. ``malloc_trim(0)`` returns the free pages of
every arena (``madvise(MADV_DONTNEED)``), so the next batch starts from pages it actually needs.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None (another libc or platform)."""
    if not sys.platform.startswith("linux"):
        return None
    try:  # the process's own C library (dlopen(NULL)); ctypes.util.find_library would run ldconfig
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


def trim_freed_memory() -> bool:
    """Return every arena's free pages to the OS; False where there is no glibc ``malloc_trim``."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True

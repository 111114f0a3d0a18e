"""Freed memory goes back to the OS after a compute call (glibc ``malloc_trim``).

The check runs in a child process of its own: in the test session's process, malloc arenas that
earlier tests grew already hold touched free pages, so new allocations need not raise the RSS.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc_trim is Linux-only")

CHILD = """
import json, threading, psutil
from steadyrank.serve.server.memory import trim_freed_memory

pins = []

def work():
    # 2,000 blocks of 100 kB (below glibc's 128 KiB mmap threshold: from this thread's arena),
    # with a 4 kB block (> 512 bytes: malloc, not Python's small-object pools) left live after
    # every 100, as a forward pass leaves its outputs between its temporaries: the arena cannot
    # shrink past them, so it keeps the freed blocks' pages.
    held = []
    for i in range(2000):
        held.append(bytearray(100_000))  # zero-filled: the pages are touched
        if i % 100 == 99:
            pins.append(bytearray(4096))
    del held

process = psutil.Process()
before = process.memory_info().rss
thread = threading.Thread(target=work)
thread.start()
thread.join()
kept = process.memory_info().rss - before
trimmed = trim_freed_memory()
print(json.dumps({"kept": kept, "after": process.memory_info().rss - before, "trimmed": trimmed}))
"""


@pytest.mark.e2e
def test_trim_returns_a_threads_freed_arena_pages() -> None:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=True)
    report = json.loads(out.stdout)
    assert report["trimmed"]
    assert report["kept"] > 100e6, f"glibc kept only {report['kept'] / 1e6:.0f} MB: nothing to trim"
    assert report["after"] < report["kept"] / 4, report

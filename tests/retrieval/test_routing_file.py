"""Issue 36, item 7: a routing settings file (``route calibrate --settings-out``) is replaced
atomically, so a crash or a full disk mid-write never leaves the next server start a torn file."""

from __future__ import annotations

import errno
import signal
import subprocess
import sys

import pytest

from steadyrank.retrieval.routing import RoutingSettings, load_settings, save_settings
from tests.retrieval.helpers import REPO

OLD = RoutingSettings(k_low=40, k_high=120, top_n=7)
NEW = RoutingSettings(k_low=20, k_high=60, top_n=5)

#: Runs save_settings(NEW) in a child whose every file opened for writing writes half of its first
#: write, flushes it to the file, and then kills the process (SIGKILL: no cleanup, no finally).
CRASH_MID_WRITE = """
import builtins, io, os, signal, sys
from steadyrank.retrieval.routing import RoutingSettings, save_settings

real_open = io.open

class DiesMidWrite:
    def __init__(self, handle):
        self.handle = handle
    def write(self, data):
        self.handle.write(data[: len(data) // 2])
        self.handle.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return self.handle.__exit__(*exc)
    def __getattr__(self, name):
        return getattr(self.handle, name)

def opening(file, mode="r", *args, **kwargs):
    handle = real_open(file, mode, *args, **kwargs)
    return DiesMidWrite(handle) if "w" in mode else handle

builtins.open = io.open = opening
save_settings(sys.argv[1], RoutingSettings(k_low=20, k_high=60, top_n=5))
"""


@pytest.mark.e2e  # the crash happens in a child process
def test_a_crash_mid_write_leaves_the_previous_settings_file_whole(tmp_path):
    path = tmp_path / "routing.json"
    save_settings(path, OLD, {"objective": "rate"})
    before = path.read_bytes()
    child = subprocess.run([sys.executable, "-c", CRASH_MID_WRITE, str(path)], cwd=REPO, capture_output=True,
                           timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    assert path.read_bytes() == before and load_settings(path) == OLD


def test_a_full_disk_mid_write_leaves_the_previous_file_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "routing.json"
    save_settings(path, OLD)
    before = path.read_bytes()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("os.fsync", full)
    with pytest.raises(OSError, match="No space left"):
        save_settings(path, NEW)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["routing.json"]
    save_settings(path, NEW)
    assert load_settings(path) == NEW

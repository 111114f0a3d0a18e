"""serve.server.cpu_priority: the compute thread keeps its priority, every other thread yields.

The checks of :func:`favour_compute` run in a child process of their own (raising a nice value
cannot be undone without privilege, so the test session's own threads are never touched); the
proxy check renices only processes it starts (and any real Serve proxy of this user, as the
server itself would). Nice values are read back from the kernel (``getpriority`` per thread id).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from steadyrank.serve.server import cpu_priority
from tests.retrieval.helpers import REPO

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")

CHILD = r"""
import json, os, sys, threading
from concurrent.futures import ThreadPoolExecutor
from steadyrank.serve.server.cpu_priority import GIL_SWITCH_INTERVAL_S, favour_compute

nice = lambda tid: os.getpriority(os.PRIO_PROCESS, tid)
idle = threading.Event()
before = threading.Thread(target=idle.wait); before.start()          # exists before the split
compute = ThreadPoolExecutor(max_workers=1)
compute_tid = compute.submit(threading.get_native_id).result()
changed = favour_compute([compute_tid], 12)

def spawn_and_report():
    out = {}
    t = threading.Thread(target=lambda: out.update(tid=threading.get_native_id(), nice=nice(threading.get_native_id())))
    t.start(); t.join()
    return out["nice"]

report = {
    "main": nice(threading.get_native_id()),
    "before": nice(before.native_id),
    "compute": nice(compute_tid),
    "started_by_compute": compute.submit(spawn_and_report).result(),   # an OpenMP team would be such a thread
    "started_by_main": spawn_and_report(),
    "changed": changed,
    "switch_interval": sys.getswitchinterval(),
    "expected_switch_interval": GIL_SWITCH_INTERVAL_S,
}
idle.set()
print(json.dumps(report))
"""


def _run_child(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.e2e
def test_favour_compute_lowers_every_thread_but_the_compute_thread_and_its_children() -> None:
    base = os.getpriority(os.PRIO_PROCESS, 0)
    if base >= 12:
        pytest.skip(f"this process already runs at nice {base}")
    report = _run_child(CHILD)
    assert report["compute"] == report["started_by_compute"] == base
    assert report["main"] == report["before"] == report["started_by_main"] == 12
    assert report["changed"] >= 2  # the main thread and the idle one at least
    assert report["switch_interval"] == pytest.approx(report["expected_switch_interval"])


@pytest.mark.e2e
def test_favour_compute_off_changes_nothing() -> None:
    report = _run_child(CHILD.replace("favour_compute([compute_tid], 12)", "favour_compute([compute_tid], 0)"))
    assert report["main"] == report["before"] == report["compute"] == report["started_by_main"]
    assert report["changed"] == 0
    assert report["switch_interval"] == pytest.approx(0.005)  # Python's default, untouched


@pytest.mark.e2e
def test_renice_local_proxies_finds_processes_titled_as_the_serve_proxy() -> None:
    """A stand-in process titled ``ray::ProxyActor`` (argv[0], as Ray's setproctitle writes it);
    an ordinary process beside it is left alone."""
    proxy = subprocess.Popen(["ray::ProxyActor", "60"], executable="/bin/sleep")
    other = subprocess.Popen(["sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while proxy.pid not in cpu_priority.local_proxy_pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proxy.pid in cpu_priority.local_proxy_pids()
        assert other.pid not in cpu_priority.local_proxy_pids()
        base = os.getpriority(os.PRIO_PROCESS, other.pid)
        assert cpu_priority.renice_local_proxies(17) >= 1
        assert os.getpriority(os.PRIO_PROCESS, proxy.pid) == max(base, 17)
        assert os.getpriority(os.PRIO_PROCESS, other.pid) == base
        assert cpu_priority.renice_local_proxies(0) == 0
    finally:
        for p in (proxy, other):
            p.kill()
            p.wait()

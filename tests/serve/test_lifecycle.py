"""Lifecycle of ``steadyrank serve`` as a process: every kind of stop (a signal to its process, to
its process group, to its whole process tree, or twice), each with requests in flight and under
load, and the loss of a replica.

The server runs in a subprocess of its own (own session and process group) with its own local Ray
cluster: ``RAY_TMPDIR`` points at a fresh short folder, so its session directory (and every Ray
process started for it) is told apart from the test session's Ray instance and from anything else
on the machine. Settings: the bundled all-MiniLM-L6-v2 embedder (also the reranker), the demo
corpus indexed once into a cache the module's servers share, shadow evaluator off. Every server of
the module listens on the same port, so each start after the first is also a second start on the
port a stopped server held. Each test starts one server (``-m lifecycle`` selects them).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest

from steadyrank.serve.launcher.lifecycle import haproxies
from steadyrank.serve.server.http.routers.health import DEAD_REPLICA_BOUND_S
from tests.serve.conftest import parse_metrics
from tests.tiers import e2e_fixture

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.lifecycle]

READY_TIMEOUT_S = 480  # a shared 2-core box under load starts Ray and three models slowly
GRACE_S = 30.0  # server.shutdown_grace_s of every server here (the default)
DOC = ("The df command reports how much disk space every mounted filesystem uses and how much is "
       "still free; du summarises the space taken by a directory tree, and ncdu browses it. ") * 4


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_free(port: int) -> bool:
    """Whether a new listener could bind ``port`` (as ``steadyrank serve``'s own check does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _cmdline(proc: psutil.Process) -> str:
    """``proc``'s command line, or "" once it has exited (or is a zombie, or may not be read): a
    process of a server's tree may exit between its listing and this call."""
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def _live(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _children(pid: int) -> list[psutil.Process]:
    try:
        return [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


@dataclass
class Server:
    process: subprocess.Popen
    url: str
    port: int
    ray_tmp: Path
    log: Path
    layout: str
    exited_at: list[float] = field(default_factory=list)  # monotonic time of the exit, once it exited

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def tree(self) -> list[psutil.Process]:
        """The server process, its descendants, and every process naming its Ray temp folder."""
        procs = {p.pid: p for p in _children(self.process.pid)}
        procs.update({p.pid: p for p in ray_processes(self.ray_tmp)})
        return list(procs.values())


def ray_processes(ray_tmp: Path) -> list[psutil.Process]:
    """Live processes of the Ray session in ``ray_tmp``: its command line names the folder, or its
    environment does (``RAY_TMPDIR``: a worker, named ``ray::…``, re-parented to init)."""
    return [proc for proc in psutil.process_iter()
            if (str(ray_tmp) in _cmdline(proc) or _environ(proc).get("RAY_TMPDIR") == str(ray_tmp)) and _live(proc)]


def _environ(proc: psutil.Process) -> dict[str, str]:
    try:
        return proc.environ()
    except psutil.Error:
        return {}


def alive(procs: list[psutil.Process]) -> list[str]:
    return [f"{proc.pid} {_cmdline(proc)[:120]}" for proc in procs if _live(proc)]


@pytest.fixture(scope="module")
def shared() -> Iterator[dict[str, object]]:
    """What the module's servers share: the index cache (built by the first start) and the port."""
    cache = Path(tempfile.mkdtemp(prefix="srlc-cache-", dir="/tmp"))
    yield {"cache": cache, "port": _free_port()}
    shutil.rmtree(cache, ignore_errors=True)


@pytest.fixture(params=["colocated"])
@e2e_fixture
def server(request: pytest.FixtureRequest, shared: dict[str, object]) -> Iterator[Server]:
    """``steadyrank serve`` in its own session on the module's port with its own Ray temp folder,
    in the ``deployments.layout`` given as the fixture's parameter (default colocated, as
    shipped), once it has printed that it serves.

    Its files live in a folder of its own under /tmp rather than pytest's ``tmp_path``: pytest
    sessions running beside this one prune old base temp folders, and Ray's unix socket paths
    under it must stay short."""
    work = Path(tempfile.mkdtemp(prefix="srlc-", dir="/tmp"))
    ray_tmp = work / "ray"
    ray_tmp.mkdir()
    port = int(shared["port"])
    assert _port_free(port), f"port {port} is still held before this start (a stopped server left it bound)"
    settings = {
        "cache_dir": str(shared["cache"]),
        "quality": {"enabled": False},
        "server": {"shutdown_grace_s": GRACE_S},
        "limits": {"request_timeout_s": 120},
        "deployments": {"layout": request.param}
        | {name: {"num_cpus": 0.1} for name in ("ingress", "searcher", "retriever", "metrics_hub")}
        | {"embedder": {"num_cpus": 0.2, "max_ongoing_requests": 32, "max_batch_size": 8},
           "reranker": {"num_cpus": 0.2, "max_ongoing_requests": 32, "max_batch_size": 4, "max_queued_requests": -1}},
    }
    config = work / "settings.json"
    config.write_text(json.dumps(settings))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
    env.update(RAY_TMPDIR=str(ray_tmp), RAY_USAGE_STATS_ENABLED="0", PYTHONUNBUFFERED="1")
    log = work / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "steadyrank.serve.cli", "serve", "--config", str(config), "--port", str(port),
             "--num-cpus", "2"],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )
    srv = Server(process, f"http://127.0.0.1:{port}", port, ray_tmp, log, request.param)
    threading.Thread(target=lambda: (process.wait(), srv.exited_at.append(time.monotonic())), daemon=True).start()
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while "is serving at" not in srv.output():  # serve.run has returned: a signal now is a stop, not an abort
            assert process.poll() is None, f"steadyrank serve exited early:\n{srv.output()}"
            assert time.monotonic() < deadline, f"not serving in {READY_TIMEOUT_S} s:\n{srv.output()}"
            time.sleep(1.0)
        assert httpx.get(f"{srv.url}/readyz", timeout=30).status_code == 200, srv.output()
        yield srv
    finally:
        leftovers = srv.tree() if process.poll() is None else ray_processes(ray_tmp)
        haproxy_files = {folder for proc in leftovers if (folder := _haproxy_folder(proc)) is not None}
        if process.poll() is None:  # a SIGKILLed server cannot remove its HAProxy folder: done below
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        for proc in leftovers + [p for folder in haproxy_files for p in haproxies(folder)]:
            with contextlib.suppress(psutil.Error):  # only this test's own processes
                proc.kill()
        for folder in [work, *haproxy_files]:
            shutil.rmtree(folder, ignore_errors=True)


def _haproxy_folder(proc: psutil.Process) -> Path | None:
    """The server's HAProxy folder if ``proc`` is its HAProxy (``-f <folder>/<node id>/haproxy.cfg``)."""
    try:
        name, command = proc.name(), proc.cmdline()
    except psutil.Error:
        return None
    if name != "haproxy" or "-f" not in command:
        return None
    return Path(command[command.index("-f") + 1]).parents[1]


def _signal_process(sig: signal.Signals) -> Callable[[Server], None]:
    return lambda srv: os.kill(srv.process.pid, sig)


def _signal_group(sig: signal.Signals) -> Callable[[Server], None]:
    """What a terminal's Ctrl-C (SIGINT) or ``kill -TERM -PGID`` does: the server leads its group."""
    return lambda srv: os.killpg(srv.process.pid, sig)


def _signal_twice(srv: Server) -> None:
    """SIGTERM, and a second one once the server said it received the first (it is draining)."""
    os.kill(srv.process.pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while "SIGTERM received" not in srv.output() and srv.process.poll() is None:
        assert time.monotonic() < deadline, "the first SIGTERM was not acknowledged in 60 s"
        time.sleep(0.05)
    os.kill(srv.process.pid, signal.SIGTERM)


def _signal_tree(srv: Server) -> None:
    """What systemd's ``KillMode=control-group`` does: SIGTERM to every process of the tree at once
    (Ray's GCS, raylet, workers and HAProxy included, whatever their process group)."""
    procs = srv.tree() + [p for folder in {_haproxy_folder(p) for p in srv.tree()} - {None} for p in haproxies(folder)]
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGTERM)


@dataclass
class Stop:
    """How a test stops the server, and what the requests in flight at the stop may expect."""
    send: Callable[[Server], None]
    served: bool  # every request in flight at the stop gets its 200 (False: a forced or lost stop)
    load: bool  # closed-loop search clients run through the stop (their answers are checked)


STOPS = {
    "SIGTERM": Stop(_signal_process(signal.SIGTERM), served=True, load=True),
    "SIGINT": Stop(_signal_process(signal.SIGINT), served=True, load=True),
    "group-SIGTERM": Stop(_signal_group(signal.SIGTERM), served=True, load=True),
    "group-SIGINT": Stop(_signal_group(signal.SIGINT), served=True, load=True),
    "double-SIGTERM": Stop(_signal_twice, served=False, load=True),
    "tree-SIGTERM": Stop(_signal_tree, served=False, load=False),
}


@dataclass
class StopRun:
    in_flight: list[tuple[int | str, float]]  # (status or error name, end time) of each slow request
    signalled: float
    late: int | str  # a request sent once the drain began: its status or error name
    load: list[tuple[int | str, str | None]]  # (status or error name, Retry-After) of each search request


async def _until(condition: Callable[[], bool | Awaitable[bool]], cap_s: float, what: str) -> None:
    """Wait for ``condition()`` (a bool or an awaitable one; checked every 0.1 s) for at most ``cap_s`` seconds."""
    deadline = time.monotonic() + cap_s
    while True:
        met = condition()
        if inspect.isawaitable(met):
            met = await met
        if met:
            return
        assert time.monotonic() < deadline, f"{what}: not within {cap_s:g} s"
        await asyncio.sleep(0.1)


async def _stop_under_load(srv: Server, stop: Stop, n: int, clients: int = 2) -> StopRun:
    """Send ``n`` slow /v1/rerank requests and (``stop.load``) run ``clients`` closed-loop
    /v1/search clients; stop the server once it holds all slow ones (its metrics say so); try a
    new request once /readyz says "draining" (or nothing answers); keep the search clients going
    until the server has exited."""
    body = {"query": "how do I find what fills my disk", "documents": [f"[{i}] {DOC}" for i in range(120)],
            "top_n": 3}
    load: list[tuple[int | str, str | None]] = []
    async with httpx.AsyncClient(base_url=srv.url, timeout=180) as client:

        async def one() -> tuple[int | str, float]:
            try:
                status: int | str = (await client.post("/v1/rerank", json=body)).status_code
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            return status, time.monotonic()

        async def searcher() -> None:
            async with httpx.AsyncClient(base_url=srv.url, timeout=60) as own:
                while srv.process.poll() is None:
                    try:
                        response = await own.post("/v1/search", json={"query": "how do I free disk space"})
                        load.append((response.status_code, response.headers.get("retry-after")))
                        if response.status_code == 503:  # a polite client waits (not Retry-After's 1 s: keep probing)
                            await asyncio.sleep(0.1)
                    except httpx.HTTPError as exc:
                        load.append((type(exc).__name__, None))
                        await asyncio.sleep(0.05)

        async def admitted() -> bool:  # the ingress holds every slow request's work (searches use the embedder)
            metrics = parse_metrics((await client.get("/metrics", timeout=30)).text)
            units = metrics.get(("steadyrank_queued_work_units", (("model", "reranker"),)), 0.0)
            return units >= n * len(body["documents"])

        async def refusing() -> bool:  # the drain began (or nothing answers any more)
            try:
                return (await client.get("/readyz", timeout=10)).json().get("status") == "draining"
            except (httpx.HTTPError, ValueError, AttributeError):
                return True

        searchers = [asyncio.create_task(searcher()) for _ in range(clients if stop.load else 0)]
        tasks = [asyncio.create_task(one()) for _ in range(n)]
        await _until(admitted, 120, f"the server holds the {n} slow requests")
        assert not any(t.done() for t in tasks), "requests finished before the signal: make them slower"
        signalled = time.monotonic()
        stop.send(srv)
        await _until(refusing, 60, "the server refuses new requests after the signal")
        try:
            late: int | str = (await client.post("/v1/rerank", json={"query": "q", "documents": ["d"]},
                                                 timeout=10)).status_code
        except httpx.HTTPError as exc:
            late = type(exc).__name__
        in_flight = await asyncio.gather(*tasks)
        while srv.process.poll() is None and time.monotonic() < signalled + GRACE_S + 30:
            await asyncio.sleep(0.2)
        await asyncio.gather(*searchers)
    return StopRun(in_flight, signalled, late, load)


@pytest.mark.parametrize(("server", "kind"), [("colocated", "SIGTERM"), ("split", "SIGINT"),
                                              ("colocated", "group-SIGTERM"), ("colocated", "group-SIGINT"),
                                              ("colocated", "double-SIGTERM"), ("colocated", "tree-SIGTERM")],
                         ids=["SIGTERM-colocated", "SIGINT-split", "group-SIGTERM", "group-SIGINT", "double-SIGTERM",
                              "tree-SIGTERM"], indirect=["server"])
def test_stop_drains_and_leaves_nothing(server: Server, kind: str) -> None:
    """Every kind of stop (the process, its group, its whole tree, a second signal) under load:

    - the server exits 0 within ``server.shutdown_grace_s`` of the signal, with no Traceback;
    - no process of its tree is left (Ray's GCS, raylet, workers; HAProxy, which Ray leaves to
      init when the worker that started it dies first), its HTTP port is free for the next
      server of the module (which starts on it), and its HAProxy folder is gone;
    - requests in flight at the signal get 200 (unless a second signal or the loss of the whole
      tree cuts the drain short); one sent once /readyz says "draining" is not served;
    - the search clients running through the stop get 200, or 503 with ``Retry-After``, or find
      the port closed: never a 404 (Ray's answer for a path once its application is deleted,
      which a load balancer takes as final).

    The first two cases also check how the server runs (both layouts): the local Ray head runs
    without the autoscaler monitor and the API server (with the dashboard off, it holds only
    Ray's usage-statistics reporter), forward passes are favoured, HAProxy holds the port, and the
    server, bound to 127.0.0.1, listens on loopback only (:func:`_assert_listens_on_loopback_only`)."""
    stop = STOPS[kind]
    tree = server.tree()
    assert any("raylet" in _cmdline(p) for p in tree), "the Ray processes were not found"
    haproxy_files = _assert_haproxy_listens(server)
    if kind in ("SIGTERM", "SIGINT"):
        idle = [_cmdline(p) for p in tree if any(a.endswith(("/monitor.py", "/dashboard.py")) for a in _cmdline(p).split())]
        assert not idle, f"the local Ray head still runs the autoscaler monitor or the API server: {idle}"
        _assert_forward_passes_favoured(server, "Ingress" if server.layout == "colocated" else "Reranker")
        _assert_listens_on_loopback_only(server, haproxy_files)
    tree = server.tree() + haproxies(haproxy_files)
    run = asyncio.run(_stop_under_load(server, stop, n=3))
    code = server.process.wait(timeout=GRACE_S + 30)
    took = server.exited_at[0] - run.signalled if server.exited_at else float("nan")
    output = server.output()
    print(f"\n[lifecycle] {kind}: exited {took:.1f} s after the signal; search answers "
          f"{sorted({str(s): sum(1 for x, _ in run.load if x == s) for s, _ in run.load}.items())}; the server said: "
          f"{[line for line in output.splitlines() if line.startswith('steadyrank: ') and 'received' not in line][-3:]}")
    assert code == 0, output
    assert took <= GRACE_S, f"the stop took {took:.1f} s, more than the grace of {GRACE_S:g} s:\n{output}"
    assert "Traceback" not in output, output
    assert "steadyrank: stopped" in output, output
    deadline = time.monotonic() + 5
    while (left := alive(tree) + alive(ray_processes(server.ray_tmp)) + alive(haproxies(haproxy_files))) \
            and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, "processes of the server's tree outlived it:\n" + "\n".join(left)
    assert not haproxy_files.exists(), f"HAProxy's files outlived the server: {haproxy_files}"
    assert _port_free(server.port), f"port {server.port} is still held after the server exited"
    if stop.served:
        assert [status for status, _ in run.in_flight] == [200] * len(run.in_flight), output
        assert all(end > run.signalled for _, end in run.in_flight), "a request was not in flight at the signal"
        assert f"{signal.SIGTERM.name if 'TERM' in kind else signal.SIGINT.name} received" in output
    assert run.late != 200, f"a request sent after the signal was served: {run.late}"
    if stop.load:
        if stop.served:  # the load was served before the signal (a stop 0.5 s later may cut its first answers)
            assert any(status == 200 for status, _ in run.load), run.load
        wrong = [(status, retry) for status, retry in run.load
                 if isinstance(status, int) and not (status == 200 or (status == 503 and retry))]
        assert not wrong, f"answers other than 200 or 503 with Retry-After during the stop: {wrong}"


def _niceness_of_threads(pid: int) -> list[int]:
    """The nice value of each thread of ``pid`` (a thread that exits meanwhile is left out)."""
    values = []
    for thread in psutil.Process(pid).threads():
        with contextlib.suppress(psutil.Error):
            values.append(psutil.Process(thread.id).nice())
    return values


def _assert_forward_passes_favoured(srv: Server, deployment: str) -> None:
    """deployments.background_niceness (default 19): in the replica that computes, the compute
    thread and the threads it started (OpenMP team) stay at nice 0 (Ray starts workers at 0 under
    ``steadyrank serve``), every other thread is at 19; the Serve proxy's threads are all at 19."""
    (replica,) = _replica_processes(srv, deployment)
    values = _niceness_of_threads(replica.pid)
    assert 1 <= values.count(0) <= 8 and values.count(19) == len(values) - values.count(0), values
    proxies = [p for p in srv.tree() if _cmdline(p).startswith("ray::ProxyActor")]
    assert proxies, "no Serve proxy in the server's tree"
    for proxy in proxies:
        assert set(_niceness_of_threads(proxy.pid)) == {19}


def _assert_haproxy_listens(srv: Server) -> Path:
    """server.ingress haproxy (the default): the HTTP port belongs to an HAProxy process of the
    server's tree, and the Ingress replica listens on a port of its own (Serve's direct ingress).
    Returns the server's HAProxy folder (``<folder>/<node id>/haproxy.cfg`` is HAProxy's ``-f``)."""
    port = int(srv.url.rsplit(":", 1)[1])
    # Ray reloads HAProxy as replicas come and go (a new process takes the listening socket over and
    # the old one exits), so the listener seen may be gone by the time the tree is read: read both
    # again until they agree, for at most 30 s
    deadline = time.monotonic() + 30
    while True:
        connections = psutil.net_connections("tcp")
        tree = {p.pid: p for p in srv.tree()}
        listeners = {c.laddr.port: c.pid for c in connections if c.status == psutil.CONN_LISTEN}
        owners = {c.pid for c in connections if c.status == psutil.CONN_LISTEN and c.laddr.port == port}
        # the folder from every HAProxy of the tree: an exiting one no longer shows its command line
        folders = {f for proc in tree.values() if (f := _haproxy_folder(proc)) is not None}
        if folders and any(pid in tree and _name_or_none(tree[pid]) == "haproxy" for pid in owners):
            break
        assert time.monotonic() < deadline, (port, owners, {pid: _name_or_none(p) for pid, p in tree.items()})
        time.sleep(0.5)
    (ingress,) = _replica_processes(srv, "Ingress")
    assert ingress.pid in listeners.values(), "the Ingress replica serves no HTTP port of its own"
    (folder,) = folders
    assert folder.name.startswith("sr-haproxy-"), folder
    return folder


def _is_loopback(address: str) -> bool:
    """127.0.0.0/8, ::1, or 127.x mapped into IPv6 (``::ffff:127.0.0.1``: an IPv6 socket bound to
    IPv4 loopback, which is how Ray's gRPC servers bind it)."""
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def _assert_listens_on_loopback_only(srv: Server, haproxy_files: Path) -> None:
    """What ``ss -ltnp`` shows for the server's process tree (and its HAProxy processes): every
    listening TCP socket on a loopback address — the HTTP front, HAProxy's stats and Prometheus
    listeners, the GCS, the raylet, the dashboard and runtime-env agents, every worker's gRPC
    server and each replica's inter-deployment gRPC server (which Ray Serve 2.60 binds to
    ``[::]:0``; :mod:`serve.server.hosting.replica_grpc` binds it to the loopback node's address). No exception."""
    tree = {p.pid: p for p in srv.tree() + haproxies(haproxy_files)}
    listening = [(c.laddr.ip, c.laddr.port, c.pid) for c in psutil.net_connections("tcp")
                 if c.status == psutil.CONN_LISTEN and c.pid in tree]
    assert any(port == srv.port for _, port, _ in listening), "the server's own port was not seen"
    exposed = [(ip, port, pid, _cmdline(tree[pid])[:60]) for ip, port, pid in listening if not _is_loopback(ip)]
    assert not exposed, f"listening beyond loopback: {exposed}"
    replicas = {pid for _, _, pid in listening if _cmdline(tree[pid]).startswith("ray::ServeReplica:")}
    assert replicas, "no replica's gRPC server was seen listening"
    print(f"\n[lifecycle] {len(listening)} listening sockets, all on loopback ({len(replicas)} replica processes)")


def _name_or_none(proc: psutil.Process) -> str | None:
    try:
        return proc.name()
    except psutil.Error:
        return None


def _replica_processes(srv: Server, deployment: str) -> list[psutil.Process]:
    """The live replica actor processes of ``deployment`` in this server's Ray session."""
    prefix = f"ray::ServeReplica:steadyrank:{deployment}"
    return [p for p in srv.tree() if _cmdline(p).startswith(prefix) and _live(p)]




async def _load_with_replica_kill(srv: Server, clients: int, answered_before: int, min_requests: int) -> dict:
    """Closed-loop /v1/rerank load from ``clients`` clients; once ``answered_before`` requests were
    answered, SIGKILL the Reranker's replica process; keep the load until /readyz has said "degraded"
    or "not_ready" to a probe sent at least ``DEAD_REPLICA_BOUND_S`` after the kill and then "ready"
    again (the replacement), and until ``min_requests`` requests were answered (each wait capped at
    120 s). /readyz is probed every 0.25 s throughout, each probe sent on time whatever the
    earlier ones take (``ready``: ``(sent, status, code)``)."""
    body = {"query": "how do I free disk space", "documents": ["df -h shows free space", "ps lists processes",
                                                                 "du -sh sums a directory"], "top_n": 2}
    outcomes: list[int | str] = []
    ready_states: list[tuple[float, str, int]] = []
    stop = asyncio.Event()
    async with httpx.AsyncClient(base_url=srv.url, timeout=120) as client:

        async def worker() -> None:
            while not stop.is_set():
                try:
                    outcomes.append((await client.post("/v1/rerank", json=body)).status_code)
                except httpx.HTTPError as exc:
                    outcomes.append(type(exc).__name__)

        async def probe() -> None:
            sent = time.monotonic()
            try:
                r = await client.get("/readyz", timeout=30)
                ready_states.append((sent, r.json()["status"], r.status_code))
            except httpx.HTTPError as exc:
                ready_states.append((sent, type(exc).__name__, 0))

        async def probes() -> None:
            sent: set[asyncio.Task] = set()
            while not stop.is_set():
                task = asyncio.create_task(probe())
                sent.add(task)
                task.add_done_callback(sent.discard)
                await asyncio.sleep(0.25)
            await asyncio.gather(*sent)

        def after(t0: float, wanted: set[str]) -> list[tuple[float, str, int]]:
            return [p for p in ready_states if p[0] >= t0 and p[1] in wanted]

        tasks = [asyncio.create_task(worker()) for _ in range(clients)] + [asyncio.create_task(probes())]
        await _until(lambda: len(outcomes) >= answered_before, 120, f"{answered_before} requests answered")
        victims = _replica_processes(srv, "Reranker")
        assert len(victims) == 1, victims
        killed_at, killed_pid = time.monotonic(), victims[0].pid
        victims[0].kill()
        bound = killed_at + DEAD_REPLICA_BOUND_S
        await _until(lambda: bool(after(bound, {"degraded", "not_ready"})), 120, "/readyz says the replica is down")
        down_at = after(bound, {"degraded", "not_ready"})[0][0]
        await _until(lambda: bool(after(down_at, {"ready"})), 120, "/readyz says ready again")
        await _until(lambda: len(outcomes) >= min_requests, 120, f"{min_requests} requests answered")
        stop.set()
        await asyncio.gather(*tasks)
    return {"outcomes": outcomes, "ready": sorted(ready_states), "killed_at": killed_at, "killed_pid": killed_pid,
            "replacements": [p.pid for p in _replica_processes(srv, "Reranker")]}


@pytest.mark.parametrize("server", ["split"], indirect=True)
def test_killed_reranker_replica_is_replaced_without_a_failed_request(server: Server) -> None:
    """In the split layout (a Reranker replica of its own; colocated, the one replica is the whole
    server and its loss fails what it held), SIGKILL of the Reranker's replica process under
    steady load (2 closed-loop clients, at least 300 requests in all): Ray Serve starts a
    replacement, no request fails (the gateway repeats a call whose replica died, within its
    deadline: issue 31, finding 10), and /readyz keeps its documented bound: the first probe sent
    ``DEAD_REPLICA_BOUND_S`` (2 s) or more after the kill says "degraded" or "not_ready" (the
    replacement takes longer than that to start), and "ready" comes back once it runs."""
    run = asyncio.run(_load_with_replica_kill(server, clients=2, answered_before=20, min_requests=300))
    outcomes = run["outcomes"]
    failed = [o for o in outcomes if o != 200]
    assert run["replacements"] and run["killed_pid"] not in run["replacements"], "the replica was not replaced"
    assert failed == [], f"{len(failed)} of {len(outcomes)} failed: {sorted(map(str, failed))}"
    since_kill = [(round(t - run["killed_at"], 2), s) for t, s, _ in run["ready"] if t >= run["killed_at"]]
    changes = [p for i, p in enumerate(since_kill) if i == 0 or p[1] != since_kill[i - 1][1]]
    print(f"\n[lifecycle] replica killed: {len(outcomes)} requests, none failed; /readyz (s after the kill, "
          f"status) where it changed: {changes}")
    first_after_bound = next(s for t, s in since_kill if t >= DEAD_REPLICA_BOUND_S)
    assert first_after_bound in ("degraded", "not_ready"), f"/readyz after the kill (s, status): {since_kill[:20]}"
    assert run["ready"][-1][1] == "ready", run["ready"][-5:]

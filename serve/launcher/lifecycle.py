"""How ``steadyrank serve`` stops: signals, the drain, and a teardown that leaves no process behind.

A stop is a signal (SIGTERM or SIGINT) to the server's process, to its whole process group (a
terminal's Ctrl-C, ``kill -TERM -PGID``, a supervisor that signals the group), to every process of
its tree at once (systemd's ``KillMode=control-group``), or a second signal during the first
stop. Every kind ends the same way, within ``server.shutdown_grace_s`` of the first signal:

1. :func:`own_process_groups`: the local Ray head started each of its processes (GCS, raylet,
   agents, log monitor) as the leader of a process group of its own, and the raylet starts every
   worker in a group of its own, so a signal to the server's group reaches the server alone; it
   then stops Ray in order instead of racing Ray's processes as they die.
2. :func:`drain`: the Ingress replicas refuse new scoring requests (JSON 503 with ``Retry-After``)
   and the server waits until none is in flight, for :func:`drain_budget` seconds at most, until a
   second signal, or until the Ray head is found dead (its processes were signalled as well:
   nothing is left to drain, and a call to it would wait ~60 s for the GCS).
3. :func:`stop_front`: HAProxy (the HTTP front of ``server.ingress: haproxy``) is told to stop
   listening (soft stop, SIGUSR1), so a request sent from now on finds the port closed, never the
   404 that Ray's HAProxy configuration answers for a path once its application is deleted. The
   application is never deleted on a local head: Ray stops with it still deployed.
4. ``ray.shutdown`` stops the local head and every worker, then :func:`reap` ends whatever of the
   server's process tree is still running (HAProxy, which Ray starts as a child of a worker and
   leaves to init when that worker dies before it; a worker that outlived the raylet, found by
   its ``RAY_RAYLET_PID`` wherever it was re-parented): a moment to exit on its own, then
   SIGTERM, then SIGKILL (:data:`REAP_WAIT_S` apart).

Steps 3 and 4 are given :data:`TEARDOWN_S` seconds (2–3 s on a 2-core machine; ~13 s once the
whole tree was signalled, where ``ray.shutdown`` meets a dead head); the
drain gets the rest of the grace. The process tree and the bound ports are checked after each kind of stop by
``tests/serve/test_lifecycle.py``.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import psutil

#: seconds of the grace kept for the teardown after the drain (front stop, ``ray.shutdown``, reap)
TEARDOWN_S = 10.0
#: seconds a process gets to exit after SIGTERM (or HAProxy after its soft stop) before SIGKILL
REAP_WAIT_S = 2.0
#: longest single call to the Serve controller or an Ingress replica during the drain (s)
CALL_S = 2.0


def drain_budget(grace_s: float) -> float:
    """Seconds in-flight requests get after the first signal: ``max(0, grace_s - TEARDOWN_S)``."""
    return max(0.0, grace_s - TEARDOWN_S)


class Stopped(Exception):
    """A stop signal arrived before the application was serving."""


class StopSignals:
    """SIGTERM and SIGINT handlers: during start-up a signal aborts it (:class:`Stopped`); while
    serving it ends :meth:`wait_serving`; a second signal sets :attr:`force` (skip the drain)."""

    def __init__(self) -> None:
        self.name = ""
        self.at = 0.0  # monotonic time of the first signal
        self.serving = False
        self.first = threading.Event()
        self.force = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: object) -> None:
        if self.first.is_set():
            self.force.set()
            return
        self.name = signal.Signals(signum).name
        self.at = time.monotonic()
        self.first.set()
        if not self.serving:
            raise Stopped

    def wait_serving(self) -> None:
        self.serving = True
        if self.first.is_set():
            return
        while not self.first.wait(1.0):  # a timed wait keeps the main thread responsive to signals
            pass

    def ignore(self) -> None:
        """From now on a signal only sets :attr:`force`: it must not interrupt the teardown."""
        self.serving = True
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: self.force.set())


@contextlib.contextmanager
def own_process_groups() -> Iterator[None]:
    """While the block runs (``ray.init`` starting a local head), every process Ray starts leads a
    process group of its own, as Ray already does on Windows (``CREATE_NEW_PROCESS_GROUP``): Ray's
    ``start_ray_process`` has no switch for it on Linux, so its ``Popen`` class is replaced by
    one that passes ``process_group=0`` for the block's duration (Ray's private API: a Ray
    without ``services.ConsolePopen`` fails here, and ``tests/serve/test_lifecycle.py``'s
    group-signal cases fail if the head is back in the server's group). The processes keep Ray's
    own kernel fate-sharing: they still die with the server if it is killed."""
    from ray._private import services

    original = services.ConsolePopen

    class OwnGroupPopen(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("process_group", 0)
            super().__init__(*args, **kwargs)

    services.ConsolePopen = OwnGroupPopen
    try:
        yield
    finally:
        services.ConsolePopen = original


def head_alive() -> bool:
    """Whether the GCS and the raylet of the local head this process started are still running
    (True when this process started none: a joined cluster is not ours to judge)."""
    from ray._private import worker

    processes = getattr(getattr(worker, "_global_node", None), "all_processes", None) or {}
    return all(info.process.poll() is None for kind in ("gcs_server", "raylet") for info in processes.get(kind, []))


def drain(ray_serve: Any, app: str, deadline: float, stop: StopSignals) -> str:
    """Drain the Ingress replicas of ``app`` (:func:`drain_ingress`) in a helper thread, and wait
    for it until ``deadline`` (monotonic s), a second signal, or the Ray head's death, whichever
    comes first (a call into a dead head would wait for the GCS). Returns how it ended:
    ``drained``, ``deadline``, ``second signal``, ``head gone`` or ``failed: <error>``."""
    outcome: list[str] = []

    def work() -> None:
        try:
            drain_ingress(ray_serve, app, deadline, stop)
            outcome.append("drained")
        except Exception as exc:  # noqa: BLE001 — the application or controller may already be failing
            outcome.append(f"failed: {type(exc).__name__}: {exc}")

    thread = threading.Thread(target=work, name="steadyrank-drain", daemon=True)
    thread.start()
    while True:
        thread.join(0.1)
        if outcome:
            return outcome[0]
        if stop.force.is_set():
            return "second signal"
        if not head_alive():
            return "head gone"
        if time.monotonic() >= deadline:
            return "deadline"


def drain_ingress(ray_serve: Any, app: str, deadline: float, stop: StopSignals, poll_s: float = 0.2) -> None:
    """Call ``drain`` on the Ingress replicas until every RUNNING one has answered and reported
    nothing in flight (the handle routes each call to one replica, so calls repeat until all
    were reached), or until ``deadline`` (monotonic s) or a second signal. Each call waits
    :data:`CALL_S` at most. Draining the front first matters for chained requests: a downstream
    replica idle for a moment (the Searcher between its Embedder and Reranker calls) must not
    stop under a request that still needs it. A call that times out (a loaded replica) is made
    again: one slow answer does not end the drain."""
    status = ray_serve.status().applications[app].deployments["Ingress"]
    replicas = max(1, int(status.replica_states.get("RUNNING", 0)))
    handle = ray_serve.get_app_handle(app)
    in_flight: dict[str, int] = {}
    while time.monotonic() < deadline and not stop.force.is_set():
        try:
            answer = handle.drain.remote().result(timeout_s=max(0.1, min(CALL_S, deadline - time.monotonic())))
        except TimeoutError:  # a replica too busy to answer within CALL_S is asked again, until the deadline
            continue
        in_flight[answer["replica"]] = int(answer["in_flight"])
        if len(in_flight) >= replicas and not any(in_flight.values()):
            return
        if len(in_flight) >= replicas:
            stop.force.wait(poll_s)


def _command(proc: psutil.Process) -> list[str]:
    """``proc``'s command line, or [] once it has exited (or may not be read)."""
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def haproxies(folder: Path) -> list[psutil.Process]:
    """The HAProxy processes whose configuration lives under ``folder`` (the server's HAProxy
    folder: ``-f <folder>/<node id>/haproxy.cfg``), wherever they were re-parented."""
    found = []
    for proc in psutil.process_iter():
        command = _command(proc)
        if "-f" in command and command.index("-f") + 1 < len(command):
            if Path(command[command.index("-f") + 1]).is_relative_to(folder) and Path(command[0]).name == "haproxy":
                found.append(proc)
    return found


def workers_of(raylets: set[int]) -> list[psutil.Process]:
    """Every live process that one of ``raylets`` started as a Ray worker, wherever it was
    re-parented (a worker whose raylet died is left to init): Ray gives each worker its raylet's
    pid in ``RAY_RAYLET_PID``."""
    if not raylets:
        return []
    wanted = {str(pid) for pid in raylets}
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.environ().get("RAY_RAYLET_PID") in wanted:
                found.append(proc)
    return found


def descendants() -> list[psutil.Process]:
    """Every live process below this one (each keeps its start time: a recycled pid is not it)."""
    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def stop_front(folder: Path | None) -> int:
    """Soft-stop the server's HAProxy processes (SIGUSR1: stop listening at once, finish the
    connections already open), SIGKILL any still running after :data:`REAP_WAIT_S`. Returns how
    many there were. No folder (``server.ingress: proxy``, or a joined cluster): nothing to do."""
    if folder is None:
        return 0
    procs = haproxies(folder)
    _signal_all(procs, signal.SIGUSR1)
    _, alive = psutil.wait_procs(procs, timeout=REAP_WAIT_S)
    _signal_all(alive, signal.SIGKILL)
    return len(procs)


def reap(procs: Iterable[psutil.Process]) -> list[str]:
    """End what of ``procs`` still runs: each gets :data:`REAP_WAIT_S` to exit on its own (a
    worker notices its raylet's death), then SIGTERM and as long again, then SIGKILL. Returns
    ``"<pid> <name>"`` of each process that had to be signalled (an empty list is a clean stop)."""
    running = list({proc.pid: proc for proc in procs if _running(proc)}.values())
    _, running = psutil.wait_procs(running, timeout=REAP_WAIT_S)
    if not running:
        return []
    ended = [f"{proc.pid} {_name(proc)}" for proc in running]
    _signal_all(running, signal.SIGTERM)
    _, alive = psutil.wait_procs(running, timeout=REAP_WAIT_S)
    _signal_all(alive, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=REAP_WAIT_S)
    return ended


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _name(proc: psutil.Process) -> str:
    try:
        return proc.name()
    except psutil.Error:
        return "?"


def _signal_all(procs: Iterable[psutil.Process], sig: signal.Signals) -> None:
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(sig)


def _mute_worker_logs() -> None:
    """Stop printing the Ray workers' log lines in this process, the first step of ``ray.shutdown``
    taken early: once the front is closed, Ray's HAProxy manager logs each failed stats poll of the
    stopped HAProxy as a traceback until the head is down."""
    from ray._private.ray_logging import global_worker_stdstream_dispatcher

    global_worker_stdstream_dispatcher.remove_handler("ray_print_logs")


class LocalHead:
    """The local Ray head this process starts (:meth:`start`) and stops (:meth:`stop`): steps 1, 3
    and 4 of the module's stop. Processes this process had started before (the index builder's
    resource tracker) are not the head's and are left alone."""

    def __init__(self, haproxy_folder: Path | None) -> None:
        self.haproxy_folder = haproxy_folder
        self.before = {proc.pid for proc in descendants()}
        self.raylets: set[int] = set()

    def start(self, init: Callable[[], object]) -> None:
        """Run ``init`` (``ray.init`` of a local head) with :func:`own_process_groups`; note the
        head's raylet, whose workers :meth:`stop` ends wherever they were re-parented."""
        with own_process_groups():
            init()
        self.raylets = {proc.pid for proc in descendants() if _name(proc) == "raylet"}

    def stop(self, ray: Any, report: Callable[[str], None]) -> None:
        """Close the HTTP front (:func:`stop_front`), ``ray.shutdown``, then :func:`reap` what of
        the tree is left; ``report`` gets one line naming what had to be ended, if anything."""
        _mute_worker_logs()
        stop_front(self.haproxy_folder)
        tree = self._tree()
        ray.shutdown()
        left = reap([*tree, *self._tree()])
        if left:
            report(f"ended {len(left)} process(es) that outlived Ray: {', '.join(left)}")

    def _tree(self) -> list[psutil.Process]:
        """The head's processes now: this process's descendants started since, and its workers
        (:func:`workers_of`) and HAProxy processes wherever they were re-parented."""
        procs = [proc for proc in descendants() if proc.pid not in self.before] + workers_of(self.raylets)
        return procs + (haproxies(self.haproxy_folder) if self.haproxy_folder is not None else [])

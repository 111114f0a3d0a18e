"""``steadyrank serve``: start Ray, deploy the application, print the URL, serve until SIGTERM/SIGINT,
then drain in-flight requests (``server.shutdown_grace_s``) and shut Serve and Ray down."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from steadyrank.serve.app.settings import Settings

DESCRIPTION = """\
Start the steadyrank Ray Serve application on this machine and serve until Ctrl-C or SIGTERM.

With no --config it runs the embedded default: the bundled all-MiniLM-L6-v2 embedder, the demo
corpus shipped with steadyrank (Linux administration passages) indexed on first start and cached
(under $STEADYRANK_CACHE or ~/.cache/steadyrank), reranking by the embedder's FP32 (HPS) scores,
dynamic-K routing, and the shadow evaluator replaying the demo golden set.

--config FILE is a steadyrank settings file (YAML or JSON; every field is documented in
deploy/settings.yaml): models, precision and scoring, index, routing, limits, API keys, golden
set, replicas/CPUs/GPUs/autoscaling per deployment. It is validated before anything starts; an
error names the bad field. API keys may also come from $STEADYRANK_API_KEYS (comma-separated).

SIGTERM or SIGINT (Ctrl-C) stops it cleanly: new requests are refused, in-flight ones finish
within server.shutdown_grace_s (default 30 s; a second signal skips the wait), then Serve and Ray
shut down and it exits 0. Ray's dashboard starts only with server.dashboard: true.

Endpoints: POST /v1/rerank, /v1/search, /v1/embeddings, /v2/rerank (Cohere v2), /rerank and
/embed (TEI; Infinity bodies on /rerank); GET /v1/models, /v1/canary,
/v1/quality, /healthz, /readyz, /metrics (Prometheus). OpenAPI docs at /docs.

To run on an existing Ray cluster instead, use Ray Serve's own config:
  serve run deploy/serve_config.yaml      (or: serve deploy deploy/serve_config.yaml)
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="start the HTTP server (Ray Serve) on the embedded default or a settings file",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", metavar="FILE", default=None,
                        help="steadyrank settings file, YAML or JSON (default: $STEADYRANK_SETTINGS if set, "
                             "else the embedded default)")
    parser.add_argument("--host", default=None,
                        help="bind address (default: the settings' http.host, 127.0.0.1; 0.0.0.0 for every interface)")
    parser.add_argument("--port", type=int, default=None, help="HTTP port (default: the settings' http.port, 8000)")
    parser.add_argument("--num-cpus", type=float, default=None,
                        help="logical CPUs of the local Ray instance (default: this machine's cores, raised to "
                             "what the deployments reserve)")
    parser.add_argument("--address", default=None,
                        help="connect to a running Ray cluster (e.g. 'auto') instead of starting a local one")
    parser.add_argument("--check", action="store_true",
                        help="validate the settings, build the index if needed, print the plan and exit")
    parser.set_defaults(func=run)


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host if host not in ("", "0.0.0.0") else "0.0.0.0", port))
        except OSError:
            return False
    return True


def _use_haproxy_ingress(files: Path) -> None:
    """Set up Ray Serve's HAProxy ingress for the local head (:func:`serve.app.ray_env.apply_haproxy_env`),
    with free ports for its side listeners and its files (configuration, admin and metrics sockets,
    server state) under ``files``, which the caller removes at exit (Ray's default is a shared
    ``/tmp/haproxy-serve`` that every run leaves a folder in); a missing HAProxy binary is a
    settings error."""
    from steadyrank.serve.app.ray_env import apply_haproxy_env

    with contextlib.ExitStack() as held:  # every socket stays bound until all are picked: distinct ports

        def free_port() -> int:
            sock = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("0.0.0.0", 0))
            return int(sock.getsockname()[1])

        apply_haproxy_env(free_port, files)
    from ray.serve._private.haproxy import get_haproxy_binary  # reads the environment set above

    try:
        get_haproxy_binary()
    except FileNotFoundError as exc:
        raise ValueError(f"server.ingress is haproxy, but {exc} (or set server.ingress: proxy)") from None


def _progress(done: int, total: int) -> None:
    print(f"\rindexing the corpus: {done}/{total} documents", end="" if done < total else "\n",
          file=sys.stderr, flush=True)


def _ensure_index_in_child(settings: Any) -> Path:
    """Build the index in a spawned child process: embedding the corpus loads the embedder (torch,
    about 0.5 GB), which this process, alive as long as the server, would otherwise keep."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from steadyrank.serve.app.default import ensure_index

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(ensure_index, settings, _progress).result()


def _precision_line(settings: Settings) -> str:
    """``embedder auto → bf16 (CPU has AMX-BF16); reranker …``: what each model runs in and why."""
    from steadyrank.serve.runtime.precision import choose_for

    models = {"embedder": settings.embedder, "reranker": settings.reranker, "canary": settings.canary}
    return "; ".join(f"{name} {choose_for(m.precision, m.device, m.backend).line()}"
                     for name, m in models.items() if m is not None)


def run(args: argparse.Namespace) -> int:
    from steadyrank.serve.app.builder import resolve_settings
    from steadyrank.serve.app.default import ensure_index, index_exists

    settings = resolve_settings(args.config)  # SettingsError (a ValueError) → one line per bad field, exit 2
    host = args.host or settings.http.host
    port = args.port if args.port is not None else settings.http.port
    if not 1 <= port <= 65535:
        raise ValueError(f"--port must be in 1..65535, got {port}")
    canary = settings.canary is not None
    reserved = settings.deployments.total_cpus(canary=canary, evaluator=settings.quality.enabled)
    source = args.config or os.environ.get("STEADYRANK_SETTINGS") or "the embedded default"
    print(f"steadyrank: settings from {source}", file=sys.stderr)
    index = ensure_index(settings) if index_exists(settings) else _ensure_index_in_child(settings)
    print(f"steadyrank: index at {index}", file=sys.stderr)
    print(f"steadyrank: precision: {_precision_line(settings)}", file=sys.stderr)
    if args.check:
        print(f"steadyrank: settings valid; deployments reserve {reserved:g} CPUs; would listen on http://{host}:{port}")
        return 0
    if args.address is None and not _port_free(host, port):
        raise ValueError(f"port {port} on {host} is already in use: stop what holds it or pass --port")

    from steadyrank.serve.app.ray_env import apply_ray_env

    apply_ray_env()  # before ray.init: the Ray processes it starts inherit them
    haproxy_files = None
    if args.address is None and settings.server.ingress == "haproxy":
        # short: HAProxy takes unix socket paths of 97 characters at most, and Ray adds a node id (56)
        haproxy_files = Path(tempfile.mkdtemp(prefix="sr-haproxy-", dir="/tmp"))
    try:
        if haproxy_files is not None:
            _use_haproxy_ingress(haproxy_files)
        return _serve_on_ray(args, settings, host, port, reserved)
    finally:
        if haproxy_files is not None:
            shutil.rmtree(haproxy_files, ignore_errors=True)


def _serve_on_ray(args: argparse.Namespace, settings: Settings, host: str, port: int, reserved: float) -> int:
    """Start (or join) Ray, deploy the application, serve until a stop signal, drain, shut down."""
    import ray
    from ray import serve as ray_serve

    from steadyrank.serve.app import build_app

    dashboard = settings.server.dashboard
    try:
        if args.address is not None:
            ray.init(address=args.address, include_dashboard=dashboard)
        else:
            cpus = args.num_cpus if args.num_cpus is not None else max(float(os.cpu_count() or 1), math.ceil(reserved))
            ray.init(num_cpus=math.ceil(max(cpus, reserved)), include_dashboard=dashboard)
    except Exception as exc:  # noqa: BLE001 — Ray raises bare Exception when its processes do not come up
        where = f"the Ray cluster at {args.address}" if args.address is not None else "a local Ray instance"
        print(f"steadyrank serve: error: could not start {where}: {exc} (an overloaded machine starts Ray "
              "slowly: retry, or free CPU)", file=sys.stderr, flush=True)
        ray.shutdown()  # stops whatever of Ray's processes did start
        return 1
    if args.address is None:
        _stop_idle_head_processes(dashboard)
    stop = _StopSignals()  # after ray.init, which installs its own SIGTERM handler
    try:
        access_log = {"enable_access_log": settings.server.access_log}
        ray_serve.start(http_options={"host": host, "port": port}, logging_config=access_log)
        print("steadyrank: starting the deployments (the first start loads the models; this takes a minute)…",
              file=sys.stderr, flush=True)
        ray_serve.run(build_app({"settings": settings}), name=APP_NAME, route_prefix="/", logging_config=access_log)
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        url = f"http://{shown}:{port}"
        print(f"\nsteadyrank is serving at {url}   (Ctrl-C or SIGTERM to stop)\n"
              f"  curl -s {url}/readyz\n"
              f"  curl -s {url}/v1/search -H 'Content-Type: application/json' -d '{{\"query\": \"how do I free disk space\"}}'\n"
              f"  metrics: {url}/metrics   API docs: {url}/docs", flush=True)
        stop.wait_serving()
        grace = settings.server.shutdown_grace_s
        print(f"\nsteadyrank: {stop.name} received: refusing new requests, finishing in-flight ones "
              f"(up to {grace:g} s; a second signal stops at once)…", file=sys.stderr, flush=True)
        _drain(ray_serve, grace, stop)
        return 0
    except _Stopped:
        print(f"\nsteadyrank: {stop.name} received during start-up: stopping…", file=sys.stderr, flush=True)
        return 0
    finally:
        stop.ignore()  # a late signal must not interrupt the shutdown itself
        try:
            ray_serve.shutdown()
        finally:
            ray.shutdown()
            print("steadyrank: stopped", file=sys.stderr, flush=True)


APP_NAME = "steadyrank"


def _stop_idle_head_processes(dashboard: bool) -> None:
    """Stop the processes of the Ray head this process just started that a local server never uses:

    - the autoscaler monitor (~85 MB resident, and a poll of the GCS every second). It only adds and
      removes nodes for a cluster launched with an autoscaling config, which a local head never has;
      Serve's replica autoscaling runs in the Serve controller. ``ray.init`` has no switch for it
      (``ray start --head --no-monitor`` has).
    - without ``server.dashboard``, the API-server process (``dashboard.py``, ~120 MB), which Ray
      then starts with one module only, ``UsageStatsHead`` (Ray's usage-statistics reporter). The
      dashboard *agent* of each node stays: the raylet shares its fate, and it exports Ray's metrics.

    They are stopped through the node handle ``ray.init`` keeps: what ``ray.shutdown`` then stops
    is the rest. A cluster joined with ``--address`` is left as it is. The handle is Ray's private
    API: a Ray without it leaves both running (``tests/serve/test_lifecycle.py`` then fails)."""
    from ray._private import worker

    node = getattr(worker, "_global_node", None)
    kills = [getattr(node, "kill_monitor", None)] + ([] if dashboard else [getattr(node, "kill_dashboard", None)])
    for kill in kills:
        if kill is not None:
            kill(check_alive=False)


class _Stopped(Exception):
    """A stop signal arrived before the application was serving."""


class _StopSignals:
    """SIGTERM and SIGINT handlers: during start-up a signal aborts it (:class:`_Stopped`); while
    serving it ends :meth:`wait_serving`; a second signal sets :attr:`force` (skip the grace)."""

    def __init__(self) -> None:
        self.name = ""
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
        self.first.set()
        if not self.serving:
            raise _Stopped

    def wait_serving(self) -> None:
        self.serving = True
        if self.first.is_set():
            return
        while not self.first.wait(1.0):  # a timed wait keeps the main thread responsive to signals
            pass

    def ignore(self) -> None:
        self.serving = True
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: self.force.set())


def _drain(ray_serve, grace_s: float, stop: _StopSignals) -> None:
    """Stop taking requests and let the in-flight ones finish, then tear the application down.

    1. Every Ingress replica is told to drain (:meth:`Ingress.drain`): new scoring requests get a
       JSON 503 with ``Retry-After``, ``/readyz`` answers 503 "draining".
    2. Wait until no Ingress replica has a request in flight (every downstream call a request
       needs has returned), ``grace_s`` at most, or a second signal.
    3. Delete the application; replicas still busy finish within their
       ``graceful_shutdown_timeout_s`` (= the grace).

    Draining the front first matters for chained requests: deleting the application stops every
    deployment at once, and a downstream replica idle for a moment (the Searcher between its
    Embedder and Reranker calls) would stop under a request that still needs it."""
    deadline = time.monotonic() + grace_s
    try:
        _drain_ingress(ray_serve, deadline, stop)
    except Exception as exc:  # noqa: BLE001 — the application or controller may already be failing
        print(f"steadyrank: draining the ingress failed ({type(exc).__name__}: {exc}); stopping the deployments",
              file=sys.stderr, flush=True)
    ray_serve.delete(APP_NAME, _blocking=False)
    deadline += 10.0
    while time.monotonic() < deadline and not stop.force.is_set():
        try:
            if APP_NAME not in ray_serve.status().applications:
                return
        except Exception:  # noqa: BLE001 — the controller may already be going away
            return
        stop.force.wait(0.2)


def _drain_ingress(ray_serve, deadline: float, stop: _StopSignals, poll_s: float = 0.2) -> None:
    """Call ``drain`` on the Ingress replicas until every RUNNING one has answered and reported
    nothing in flight (the handle routes each call to one replica, so calls repeat until all
    were reached), or until ``deadline`` (monotonic s) or a second signal."""
    status = ray_serve.status().applications[APP_NAME].deployments["Ingress"]
    replicas = max(1, int(status.replica_states.get("RUNNING", 0)))
    handle = ray_serve.get_app_handle(APP_NAME)
    in_flight: dict[str, int] = {}
    while time.monotonic() < deadline and not stop.force.is_set():
        answer = handle.drain.remote().result(timeout_s=max(0.1, deadline - time.monotonic()))
        in_flight[answer["replica"]] = int(answer["in_flight"])
        if len(in_flight) >= replicas and not any(in_flight.values()):
            return
        if len(in_flight) >= replicas:
            stop.force.wait(poll_s)

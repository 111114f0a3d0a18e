"""``steadyrank serve``: start Ray, deploy the application, print the URL, serve until SIGTERM/SIGINT,
then drain in-flight requests (``server.shutdown_grace_s``) and shut Serve and Ray down."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from steadyrank.serve.runtime.settings import Precision

if TYPE_CHECKING:
    from steadyrank.serve.launcher.lifecycle import StopSignals
    from steadyrank.serve.settings import Settings

DESCRIPTION = """\
Start the steadyrank Ray Serve application on this machine and serve until Ctrl-C or SIGTERM.

  steadyrank serve --reranker BAAI/bge-reranker-v2-m3            # a Hub id (or a local folder)
  steadyrank serve --reranker BAAI/bge-reranker-v2-m3 --device cuda --dtype bf16
  steadyrank serve --config settings.yaml --host 0.0.0.0 --api-key-file keys

A Hub id is downloaded into the Hugging Face cache on first use (HF_HOME; HF_TOKEN, HF_HUB_OFFLINE,
HF_ENDPOINT honoured; `steadyrank models pull` downloads ahead of time) and served under its id.

With no --config it runs the embedded default: the bundled all-MiniLM-L6-v2 embedder, the demo
corpus shipped with steadyrank (Linux administration passages) indexed on first start and cached
(under $STEADYRANK_CACHE or ~/.cache/steadyrank), reranking by the embedder's FP32 (HPS) scores,
dynamic-K routing, and the shadow evaluator replaying the demo golden set.

--config FILE is a steadyrank settings file (YAML or JSON; every field is documented in
deploy/settings.yaml): models, precision and scoring, index, routing, limits, API keys, golden
set, replicas/CPUs/GPUs/autoscaling per deployment. It is validated before anything starts; an
error names the bad field. API keys may also come from $STEADYRANK_API_KEYS (comma-separated) or a
file (--api-key-file); without any key the server binds a loopback address only (auth.allow_anonymous).

SIGTERM or SIGINT (Ctrl-C), to the process or its whole process group, stops it cleanly within
server.shutdown_grace_s (default 30 s): new requests are refused (503), in-flight ones finish (a
second signal skips the wait), then the port closes, Ray shuts down and it exits 0, leaving no
process behind. Ray's dashboard starts only with server.dashboard: true.

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
                             "else the embedded default); the flags below override it")
    models = parser.add_argument_group("models (override the settings file)")
    models.add_argument("--reranker", metavar="ID_OR_DIR", default=None,
                        help="reranker: a local model folder or a Hugging Face Hub id (org/name), downloaded into "
                             "the Hub cache on first use (HF_TOKEN, HF_HUB_OFFLINE, HF_ENDPOINT honoured) and served "
                             "under its id; default: the settings' reranker, else the embedder's FP32 scores")
    models.add_argument("--embedder", metavar="ID_OR_DIR", default=None,
                        help="embedder (bi-encoder) for queries and the index: a local folder or a Hub id; default: "
                             "the settings' embedder, else the bundled all-MiniLM-L6-v2 (no download)")
    models.add_argument("--dtype", choices=get_args(Precision), default=None,
                        help="forward precision of the embedder and the reranker (settings: <model>.precision; "
                             "auto: bf16 where the device has fast BF16, else fp32; int8: CPU only), always with HPS")
    models.add_argument("--device", metavar="cpu|cuda[:N]", default=None,
                        help="device of the embedder and the reranker: cpu, cuda or cuda:N (settings: <model>.device); "
                             "cuda gets each model replica a GPU (deployments.<x>.num_gpus is derived from it)")
    models.add_argument("--replicas", type=int, default=None, metavar="N",
                        help="replicas of the reranker and embedder deployments; N > 1 switches "
                             "deployments.layout to split (the colocated layout runs one replica)")
    parser.add_argument("--api-key-file", metavar="FILE", default=None,
                        help="file of accepted API keys, one per line (settings: auth.keys_file; e.g. a mounted "
                             "Kubernetes Secret); without any key the server binds a loopback address only")
    parser.add_argument("--host", default=None,
                        help="bind address (default: the settings' http.host, 127.0.0.1; 0.0.0.0 for every interface, "
                             "which needs an API key or auth.allow_anonymous: true)")
    parser.add_argument("--port", type=int, default=None, help="HTTP port (default: the settings' http.port, 8000)")
    parser.add_argument("--num-cpus", type=float, default=None,
                        help="logical CPUs of the local Ray instance (default: this machine's cores, raised to "
                             "what the deployments reserve)")
    parser.add_argument("--address", default=None,
                        help="connect to a running Ray cluster (e.g. 'auto') instead of starting a local one")
    parser.add_argument("--check", action="store_true",
                        help="validate the settings (models resolved or downloaded, GPUs against devices), build the "
                             "index if needed, print the plan and exit")
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
    """Set up Ray Serve's HAProxy ingress for the local head (:func:`serve.launcher.ray_env.apply_haproxy_env`),
    with free ports for its side listeners and its files (configuration, admin and metrics sockets,
    server state) under ``files``, which the caller removes at exit (Ray's default is a shared
    ``/tmp/haproxy-serve`` that every run leaves a folder in), and the side listeners on loopback
    (:mod:`serve.launcher.haproxy_listeners`); a missing HAProxy binary is a settings error."""
    from steadyrank.serve.launcher.haproxy_listeners import install
    from steadyrank.serve.launcher.ray_env import apply_haproxy_env

    with contextlib.ExitStack() as held:  # every socket stays bound until all are picked: distinct ports

        def free_port() -> int:
            sock = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("0.0.0.0", 0))
            return int(sock.getsockname()[1])

        apply_haproxy_env(free_port, files)
    from ray.serve._private.haproxy import get_haproxy_binary  # reads the environment set above

    try:
        binary = get_haproxy_binary()
    except FileNotFoundError as exc:
        raise ValueError(f"server.ingress is haproxy, but {exc} (or set server.ingress: proxy)") from None
    install(files, binary)


def _progress(done: int, total: int) -> None:
    print(f"\rindexing the corpus: {done}/{total} documents", end="" if done < total else "\n",
          file=sys.stderr, flush=True)


def _in_child(func: Callable[..., Any], *args: Any) -> Any:
    """``func(*args)`` in a spawned child process: building the index loads the embedder (torch,
    about 0.5 GB), checking the golden set opens the index (FAISS, BM25), and this process, alive as
    long as the server, would otherwise keep them."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(func, *args).result()


def _settings_source(args: argparse.Namespace) -> tuple[Any, str, list[str]]:
    """What :func:`resolve_settings` reads (the settings file, or the raw mapping with the flags
    laid over it), a label for the start line, and notes about what the flags changed."""
    from steadyrank.serve.launcher.overrides import ServeFlags, apply_flags
    from steadyrank.serve.settings import ENV_SETTINGS, read_settings_file

    flags = ServeFlags(reranker=args.reranker, embedder=args.embedder, dtype=args.dtype, device=args.device,
                       replicas=args.replicas, api_key_file=args.api_key_file, host=args.host, port=args.port)
    if flags.replicas is not None and flags.replicas < 1:
        raise ValueError(f"--replicas must be ≥ 1, got {flags.replicas}")
    if flags.port is not None and not 1 <= flags.port <= 65535:
        raise ValueError(f"--port must be in 1..65535, got {flags.port}")
    file = args.config or os.environ.get(ENV_SETTINGS)
    label = file or "the embedded default"
    if not flags.given():
        return file, label, []
    data, notes = apply_flags(read_settings_file(file) if file else {}, flags)
    return data, f"{label} and the command line", notes


def _precision_line(settings: Settings) -> str:
    """``embedder auto → bf16 (CPU has AMX-BF16); reranker …``: what each model runs in and why. A
    cross-encoder's ``auto`` is measured when it first loads on a machine (then cached):
    ``measured when the model loads`` until then."""
    from steadyrank.serve.runtime.inspection import inspect_model, model_id
    from steadyrank.serve.runtime.precision import choose_for
    from steadyrank.serve.runtime.precision_calibration import CACHE_FILE, expected_choice

    models = {"embedder": settings.embedder, "reranker": settings.reranker, "canary": settings.canary}
    parts = []
    for name, m in models.items():
        if m is None:
            continue
        spec = inspect_model(m) if name != "embedder" and m.precision == "auto" else None
        choice = (choose_for(m.precision, m.device, m.backend) if spec is None or spec.kind == "bi-encoder"
                  else expected_choice(spec.path, model_id(spec), m, settings.cache_path() / CACHE_FILE))
        parts.append(f"{name} {choice.line()}" if choice is not None else f"{name} auto → {MEASURED_AT_LOAD}")
    return "; ".join(parts)


#: the start line's words for a precision that is measured when the model loads
MEASURED_AT_LOAD = "measured when the model loads"


def run(args: argparse.Namespace) -> int:
    from steadyrank.serve.launcher.gpus import gpu_report
    from steadyrank.serve.server.default import ensure_index, index_exists
    from steadyrank.serve.server.golden_guard import check_golden_coverage
    from steadyrank.serve.server.hosting.builder import resolve_settings

    source, label, notes = _settings_source(args)
    settings = resolve_settings(source)  # SettingsError (a ValueError) → one line per bad field, exit 2
    host, port = settings.http.host, settings.http.port
    keys = settings.auth.check_bind(host)  # no key on a non-loopback address → SettingsError
    canary = settings.canary is not None
    reserved = settings.deployments.total_cpus(canary=canary, evaluator=settings.quality.enabled)
    print(f"steadyrank: settings from {label}", file=sys.stderr)
    for note in notes:
        print(f"steadyrank: {note}", file=sys.stderr)
    for model, section in (("reranker", settings.reranker), ("embedder", settings.embedder), ("canary", settings.canary)):
        if section is not None and section.path is not None:
            shown = f"{section.served_id} ({section.path})" if section.served_id else section.path
            print(f"steadyrank: {model}: {shown}", file=sys.stderr)
    warnings = gpu_report(settings, local=args.address is None)  # a GPU/device mismatch → SettingsError
    for warning in warnings:
        print(f"steadyrank: warning: {warning}", file=sys.stderr)
    index = ensure_index(settings) if index_exists(settings) else _in_child(ensure_index, settings, _progress)
    print(f"steadyrank: index at {index}", file=sys.stderr)
    if settings.quality.enabled and settings.quality.golden is not None:  # the own-corpus guard
        _in_child(check_golden_coverage, settings, index)
    auth = f"{keys} API key(s) active" if keys else "no API key: every route is open (loopback only)"
    if keys == 0 and settings.auth.allow_anonymous:
        auth = "no API key: every route is open (auth.allow_anonymous)"
    precision = _precision_line(settings)
    print(f"steadyrank: precision: {precision}", file=sys.stderr)
    if args.check:
        print(f"steadyrank: settings valid; deployments reserve {reserved:g} CPUs; would listen on http://{host}:{port}; "
              f"{auth}")
        return 0
    if args.address is None and not _port_free(host, port):
        raise ValueError(f"port {port} on {host} is already in use: stop what holds it or pass --port")

    from steadyrank.serve.launcher.ray_env import apply_local_head_env, apply_ray_env

    apply_ray_env()  # before ray.init: the Ray processes it starts inherit them
    if args.address is None:  # before ray is first imported: Ray's own processes on loopback only
        apply_local_head_env()
    haproxy_files = None
    if args.address is None and settings.server.ingress == "haproxy":
        # short: HAProxy takes unix socket paths of 97 characters at most, and Ray adds a node id (56)
        haproxy_files = Path(tempfile.mkdtemp(prefix="sr-haproxy-", dir="/tmp"))
    try:
        if haproxy_files is not None:
            _use_haproxy_ingress(haproxy_files)
        return _serve_on_ray(args, settings, host, port, reserved, auth, haproxy_files, precision)
    finally:
        if haproxy_files is not None:
            shutil.rmtree(haproxy_files, ignore_errors=True)


def _serve_on_ray(args: argparse.Namespace, settings: Settings, host: str, port: int, reserved: float, auth: str,
                  haproxy_files: Path | None, measured_before: str) -> int:
    """Start (or join) Ray, deploy the application, serve until a stop signal, drain, shut down
    (the stop: :mod:`serve.launcher.lifecycle`). ``measured_before``: the precision line printed before
    the deployments started (printed again once they run, where it waited for a calibration)."""
    import ray
    from ray import serve as ray_serve

    from steadyrank.serve.launcher.lifecycle import LocalHead, Stopped, StopSignals, drain, drain_budget
    from steadyrank.serve.launcher.ray_env import ray_log_level, serve_logging
    from steadyrank.serve.server.hosting.builder import build_app

    dashboard = settings.server.dashboard
    quiet = ray_log_level(settings.server)
    head = None if args.address is not None else LocalHead(haproxy_files)
    try:
        if head is None:
            ray.init(address=args.address, include_dashboard=dashboard, logging_level=quiet)
        else:
            cpus = args.num_cpus if args.num_cpus is not None else max(float(os.cpu_count() or 1), math.ceil(reserved))
            head.start(lambda: ray.init(num_cpus=math.ceil(max(cpus, reserved)), include_dashboard=dashboard,
                                        logging_level=quiet))
    except Exception as exc:  # noqa: BLE001 — Ray raises bare Exception when its processes do not come up
        where = f"the Ray cluster at {args.address}" if args.address is not None else "a local Ray instance"
        print(f"steadyrank serve: error: could not start {where}: {exc} (an overloaded machine starts Ray "
              "slowly: retry, or free CPU)", file=sys.stderr, flush=True)
        ray.shutdown()  # stops whatever of Ray's processes did start
        return 1
    if head is not None:
        _stop_idle_head_processes(dashboard)
    stop = StopSignals()  # after ray.init, which installs its own SIGTERM handler
    try:
        access_log = serve_logging(settings.server)
        ray_serve.start(http_options={"host": host, "port": port}, logging_config=access_log)
        print("steadyrank: starting the deployments (the first start loads the models; this takes a minute)…",
              file=sys.stderr, flush=True)
        try:
            ray_serve.run(build_app({"settings": settings}), name=APP_NAME, route_prefix="/",
                          logging_config=access_log)
        except RuntimeError as exc:  # Serve's "Deploying application … failed": the replica's traceback is above
            print(f"steadyrank serve: error: the deployments did not start: {exc} (the replica's error is logged "
                  "above)", file=sys.stderr, flush=True)
            return 1
        if MEASURED_AT_LOAD in measured_before:  # the calibration ran as the deployments started: its choice
            print(f"steadyrank: precision: {_precision_line(settings)}", file=sys.stderr, flush=True)
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        url = f"http://{shown}:{port}"
        print(f"\nsteadyrank is serving at {url}   ({auth}; Ctrl-C or SIGTERM to stop)\n"
              f"  curl -s {url}/readyz\n"
              f"  curl -s {url}/v1/search -H 'Content-Type: application/json' -d '{{\"query\": \"how do I free disk space\"}}'\n"
              f"  metrics: {url}/metrics   API docs: {url}/docs", flush=True)
        stop.wait_serving()
        budget = drain_budget(settings.server.shutdown_grace_s)
        print(f"\nsteadyrank: {stop.name} received: refusing new requests, finishing in-flight ones "
              f"(up to {budget:g} s; a second signal stops at once)…", file=sys.stderr, flush=True)
        ended = drain(ray_serve, APP_NAME, stop.at + budget, stop)
        if ended != "drained":
            print(f"steadyrank: drain ended early ({ended}); stopping", file=sys.stderr, flush=True)
        if head is None:  # a joined cluster outlives this process: take the application off it
            _delete_app(ray_serve, time.monotonic() + 10.0, stop)
        return 0
    except Stopped:
        print(f"\nsteadyrank: {stop.name} received during start-up: stopping…", file=sys.stderr, flush=True)
        return 0
    finally:
        stop.ignore()  # a late signal must not interrupt the shutdown itself
        if head is None:
            try:
                ray_serve.shutdown()
            finally:
                ray.shutdown()
        else:
            head.stop(ray, lambda line: print(f"steadyrank: {line}", file=sys.stderr, flush=True))
        took = f" ({time.monotonic() - stop.at:.1f} s after {stop.name})" if stop.at else ""
        print(f"steadyrank: stopped{took}", file=sys.stderr, flush=True)


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


def _delete_app(ray_serve, deadline: float, stop: StopSignals) -> None:
    """Delete the application from a joined cluster (after its drain) and wait until it is gone,
    until ``deadline`` (monotonic s) at most or a second signal; replicas still busy finish within
    their ``graceful_shutdown_timeout_s`` (= the grace)."""
    ray_serve.delete(APP_NAME, _blocking=False)
    while time.monotonic() < deadline and not stop.force.is_set():
        try:
            if APP_NAME not in ray_serve.status().applications:
                return
        except Exception:  # noqa: BLE001 — the controller may already be going away
            return
        stop.force.wait(0.2)

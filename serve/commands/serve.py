"""``steadyrank serve``: start Ray, deploy the application, print the URL, block until Ctrl-C."""

from __future__ import annotations

import argparse
import math
import os
import socket
import sys
import time

DESCRIPTION = """\
Start the steadyrank Ray Serve application on this machine and block until Ctrl-C.

With no --config it runs the embedded default: the bundled all-MiniLM-L6-v2 embedder, the demo
corpus shipped with steadyrank (Linux administration passages) indexed on first start and cached
(under $STEADYRANK_CACHE or ~/.cache/steadyrank), reranking by the embedder's FP32 (HPS) scores,
dynamic-K routing, and the shadow evaluator replaying the demo golden set.

--config FILE is a steadyrank settings file (YAML or JSON; every field is documented in
deploy/settings.yaml): models, precision and scoring, index, routing, limits, API keys, golden
set, replicas/CPUs/GPUs/autoscaling per deployment. It is validated before anything starts; an
error names the bad field. API keys may also come from $STEADYRANK_API_KEYS (comma-separated).

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


def _progress(done: int, total: int) -> None:
    print(f"\rindexing the corpus: {done}/{total} documents", end="" if done < total else "\n",
          file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from steadyrank.serve.app.builder import resolve_settings
    from steadyrank.serve.app.default import ensure_index

    settings = resolve_settings(args.config)  # SettingsError (a ValueError) → one line per bad field, exit 2
    host = args.host or settings.http.host
    port = args.port if args.port is not None else settings.http.port
    if not 1 <= port <= 65535:
        raise ValueError(f"--port must be in 1..65535, got {port}")
    canary = settings.canary is not None
    reserved = settings.deployments.total_cpus(canary=canary, evaluator=settings.quality.enabled)
    source = args.config or os.environ.get("STEADYRANK_SETTINGS") or "the embedded default"
    print(f"steadyrank: settings from {source}", file=sys.stderr)
    index = ensure_index(settings, on_progress=_progress)
    print(f"steadyrank: index at {index}", file=sys.stderr)
    if args.check:
        print(f"steadyrank: settings valid; deployments reserve {reserved:g} CPUs; would listen on http://{host}:{port}")
        return 0
    if args.address is None and not _port_free(host, port):
        raise ValueError(f"port {port} on {host} is already in use: stop what holds it or pass --port")

    import ray
    from ray import serve as ray_serve

    from steadyrank.serve.app import build_app

    if args.address is not None:
        ray.init(address=args.address, include_dashboard=False)
    else:
        cpus = args.num_cpus if args.num_cpus is not None else max(float(os.cpu_count() or 1), math.ceil(reserved))
        ray.init(num_cpus=math.ceil(max(cpus, reserved)), include_dashboard=False)
    try:
        ray_serve.start(http_options={"host": host, "port": port})
        print("steadyrank: starting the deployments (the first start loads the models; this takes a minute)…",
              file=sys.stderr, flush=True)
        ray_serve.run(build_app({"settings": settings}), name="steadyrank", route_prefix="/")
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        url = f"http://{shown}:{port}"
        print(f"\nsteadyrank is serving at {url}   (Ctrl-C to stop)\n"
              f"  curl -s {url}/readyz\n"
              f"  curl -s {url}/v1/search -H 'Content-Type: application/json' -d '{{\"query\": \"how do I free disk space\"}}'\n"
              f"  metrics: {url}/metrics   API docs: {url}/docs", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("\nsteadyrank: shutting down…", file=sys.stderr)
        return 0
    finally:
        try:
            ray_serve.shutdown()
        finally:
            ray.shutdown()

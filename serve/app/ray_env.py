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
  (:mod:`serve.app.cpu_priority`). Read by the raylet when it starts: for ``serve deploy`` set it
  in the environment of ``ray start`` on each node.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

RAY_ENV_DEFAULTS: dict[str, str] = {
    "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",
    "RAY_SERVE_METRICS_EXPORT_INTERVAL_MS": "1000",
    "RAY_SERVE_CONTROL_LOOP_INTERVAL_S": "0.5",
    "RAY_worker_niceness": "0",
}


#: read by the Serve controller (started by ``serve.start``) or the raylet, not by replicas
NOT_READ_BY_REPLICAS = frozenset({"RAY_SERVE_CONTROL_LOOP_INTERVAL_S", "RAY_worker_niceness"})


def replica_env() -> dict[str, str]:
    """The entries replicas read: what an application's ``runtime_env.env_vars`` can carry."""
    return {name: value for name, value in RAY_ENV_DEFAULTS.items() if name not in NOT_READ_BY_REPLICAS}


def apply_ray_env(environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """Set every :data:`RAY_ENV_DEFAULTS` entry the environment lacks; returns the values now in
    force for those names (the user's where they had set one)."""
    for name, value in RAY_ENV_DEFAULTS.items():
        environ.setdefault(name, value)
    return {name: environ[name] for name in RAY_ENV_DEFAULTS}

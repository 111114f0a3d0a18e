"""Replica health of the running application, from the Ray Serve controller, for ``/readyz``.

A deployment is *degraded* when fewer of its replicas are RUNNING than it has in total (one died and
is being replaced, or one is starting), or when Serve reports it UNHEALTHY. The application is
*serving* while every deployment keeps at least one RUNNING replica (requests to a deployment with
none wait until its replacement is up).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ReplicaHealth:
    degraded: dict[str, dict[str, Any]] = field(default_factory=dict)  # deployment → status, replica states
    serving: bool = True

    @property
    def healthy(self) -> bool:
        return not self.degraded


def replica_health(app_name: str) -> ReplicaHealth:
    """The degraded deployments of ``app_name`` (blocking: one controller call)."""
    from ray import serve as ray_serve

    app = ray_serve.status().applications.get(app_name)
    if app is None:
        return ReplicaHealth({"(application)": {"status": "missing"}}, serving=False)
    degraded: dict[str, dict[str, Any]] = {}
    serving = True
    for name, deployment in app.deployments.items():
        states = {str(getattr(k, "value", k)): int(v) for k, v in deployment.replica_states.items()}
        running = states.get("RUNNING", 0)
        status = str(getattr(deployment.status, "value", deployment.status))
        if running < sum(states.values()) or status == "UNHEALTHY" or running == 0:
            degraded[name] = {"status": status, "replicas": states}
        serving = serving and running > 0
    return ReplicaHealth(degraded, serving)


async def replica_health_async(app_name: str, timeout_s: float = 5.0) -> ReplicaHealth:
    """:func:`replica_health` off the event loop, with a timeout."""
    return await asyncio.wait_for(asyncio.to_thread(replica_health, app_name), timeout=timeout_s)

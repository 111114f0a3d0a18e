"""Replica and node health of the running application, for ``/readyz`` and the replica gauge.

A deployment is *degraded* when fewer of its replicas are RUNNING than it has in total (one died and
is being replaced, or one is starting), when Serve reports it UNHEALTHY, or when a replica the
controller counts has no live actor any more (*dead*, below). The application is *serving* while
every deployment keeps at least one RUNNING replica that is not dead (requests to a deployment with
none wait until its replacement is up).

A *dead replica*: the Serve controller learns that a replica's process died only at its next health
check of it (every ``health_check_period_s``, 10 s by default), and counts it RUNNING until then. The
GCS learns it at once (the node's raylet reports the worker's exit; Serve starts replicas with
``max_restarts=0``, so the GCS then drops the actor's name). So the replicas the controller counts
are compared with the replica actors the GCS lists alive: the difference is dead.

A *lost node* is one the cluster still lists as alive whose raylet does not accept a TCP connection
within ``probe_timeout_s``. Ray's GCS marks a killed node dead only after its health checks fail
for several periods (tens of seconds by default), and Serve keeps routing to the replicas there
until then, so requests fail while Serve still reports every replica RUNNING. While a node is lost
the application is degraded and *not* serving; once the GCS has marked it dead, Serve replaces its
replicas and the replica rule above applies again (docs/ARCHITECTURE.md, "Health").
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, cast

from steadyrank.serve.server.components.metrics_hub import ReplicaStates


@dataclass(frozen=True)
class ReplicaHealth:
    degraded: dict[str, dict[str, Any]] = field(default_factory=dict)  # deployment → status, replica states
    serving: bool = True
    lost_nodes: list[str] = field(default_factory=list)  # node ids (see the module docstring)

    @property
    def healthy(self) -> bool:
        return not self.degraded and not self.lost_nodes


def replica_states(app_name: str) -> ReplicaStates | None:
    """Every deployment of ``app_name`` with its status and replica counts by state, from the Serve
    controller (blocking: one controller call); None if the application does not exist."""
    from ray import serve as ray_serve

    app = ray_serve.status().applications.get(app_name)
    if app is None:
        return None
    return {
        name: (str(getattr(d.status, "value", d.status)),
               {str(getattr(k, "value", k)): int(v) for k, v in d.replica_states.items()})
        for name, d in app.deployments.items()
    }


def this_app_replica_states() -> ReplicaStates | None:
    """:func:`replica_states` of the application this Serve replica belongs to (blocking); the
    MetricsHub's reader of the replica gauge (:mod:`serve.server.components.metrics_hub`)."""
    from ray import serve as ray_serve

    return replica_states(ray_serve.get_replica_context().app_name)


def live_replicas(app_name: str) -> dict[str, int]:
    """``{deployment: replica actors of app_name the GCS lists alive}`` (blocking: one GCS call)."""
    import ray
    from ray.serve._private.common import ReplicaID

    alive: dict[str, int] = {}
    # with all_namespaces, {"name", "namespace"} per actor (Ray annotates the plain list of names)
    named = cast("list[dict[str, str]]", ray.util.list_named_actors(all_namespaces=True))
    for actor in named:
        if ReplicaID.is_full_id_str(actor["name"]):
            deployment = ReplicaID.from_full_id_str(actor["name"]).deployment_id
            if deployment.app_name == app_name:
                alive[deployment.name] = alive.get(deployment.name, 0) + 1
    return alive


def replica_health(app_name: str) -> ReplicaHealth:
    """The degraded deployments of ``app_name`` (blocking: one controller call and one GCS call)."""
    states = replica_states(app_name)
    if states is None:
        return ReplicaHealth({"(application)": {"status": "missing"}}, serving=False)
    alive = live_replicas(app_name)
    degraded: dict[str, dict[str, Any]] = {}
    serving = True
    for name, (status, counts) in states.items():
        running = counts.get("RUNNING", 0)
        dead = max(0, sum(counts.values()) - alive.get(name, 0))  # counted by the controller, gone from the GCS
        if dead or running < sum(counts.values()) or status == "UNHEALTHY" or running == 0:
            degraded[name] = {"status": status, "replicas": counts} | ({"dead": dead} if dead else {})
        serving = serving and running - dead > 0  # the dead taken to be RUNNING ones: the cautious reading
    return ReplicaHealth(degraded, serving)


def _alive_nodes() -> list[tuple[str, str, int]]:
    """``(node id, raylet address, raylet port)`` of every node the GCS lists as alive (blocking)."""
    import ray

    return [(n["NodeID"], n["NodeManagerAddress"], int(n["NodeManagerPort"])) for n in ray.nodes() if n["Alive"]]


async def _answers(address: str, port: int, timeout_s: float) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(address, port), timeout=timeout_s)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    return True


async def lost_nodes(probe_timeout_s: float = 1.0) -> list[str]:
    """Ids of the nodes listed alive whose raylet does not accept a connection (probed concurrently)."""
    nodes = await asyncio.to_thread(_alive_nodes)
    answers = await asyncio.gather(*(_answers(address, port, probe_timeout_s) for _, address, port in nodes))
    return sorted(node for (node, _, _), ok in zip(nodes, answers, strict=True) if not ok)


async def replica_health_async(app_name: str, timeout_s: float = 5.0) -> ReplicaHealth:
    """:func:`replica_health` off the event loop, with a timeout, and the :func:`lost_nodes`: any
    lost node makes the application degraded and not serving."""

    async def both() -> tuple[ReplicaHealth, list[str]]:  # in turn: no future is left unretrieved on cancel
        return await asyncio.to_thread(replica_health, app_name), await lost_nodes()

    health, lost = await asyncio.wait_for(both(), timeout=timeout_s)
    if not lost:
        return health
    return ReplicaHealth(health.degraded, False, lost)

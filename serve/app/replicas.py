"""Replica counts per deployment from Ray Serve's status, as ``steadyrank_deployment_replicas``
updates for the MetricsHub (``(op, name, label values, value)``, see ``serve.app.telemetry``).

States that disappear (e.g. ``STARTING`` once a replica runs) are set back to 0, so a scrape always
shows the current count of every state seen before.
"""

from __future__ import annotations

from typing import Any

METRIC = "steadyrank_deployment_replicas"


def replica_counts() -> dict[tuple[str, str], int]:
    """``{(deployment, state): replicas}`` over every Serve application of this Ray cluster."""
    from ray import serve as ray_serve

    counts: dict[tuple[str, str], int] = {}
    for app in ray_serve.status().applications.values():
        for name, deployment in app.deployments.items():
            for state, n in deployment.replica_states.items():
                key = (name, str(getattr(state, "value", state)))
                counts[key] = counts.get(key, 0) + int(n)
    return counts


class ReplicaGauge:
    """Turns successive :func:`replica_counts` into ``set`` updates (vanished states → 0)."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, str]] = set()

    def updates(self, counts: dict[tuple[str, str], int]) -> list[tuple[str, str, tuple[str, ...], Any]]:
        self._seen |= set(counts)
        return [("set", METRIC, key, float(counts.get(key, 0))) for key in sorted(self._seen)]

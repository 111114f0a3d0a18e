"""``MetricsHub``: owns the prometheus-client registry every replica's Recorder flushes into.

On every render it also sets ``steadyrank_deployment_replicas{deployment, state}`` from Serve's
status of this application (:func:`serve.app.health.replica_states`); a state seen before and now
gone (``STARTING`` once the replica runs) is set back to 0, so a scrape shows every count.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ray import serve

from steadyrank.serve.app.health import ReplicaStates, replica_states
from steadyrank.serve.telemetry import MetricsStore

logger = logging.getLogger(__name__)

REPLICAS_METRIC = "steadyrank_deployment_replicas"


class ReplicaGauge:
    """Successive :func:`replica_states` as ``set`` updates of ``steadyrank_deployment_replicas``."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, str]] = set()

    def updates(self, states: ReplicaStates) -> list[tuple[str, str, tuple[str, ...], float]]:
        counts = {(name, state): n for name, (_, by_state) in states.items() for state, n in by_state.items()}
        self._seen |= set(counts)
        return [("set", REPLICAS_METRIC, key, float(counts.get(key, 0))) for key in sorted(self._seen)]


@serve.deployment(name="MetricsHub", num_replicas=1)
class MetricsHub:
    """``record(updates)`` from Recorders, ``render()`` for ``/metrics``."""

    def __init__(self) -> None:
        self.store = MetricsStore()
        self.started = time.time()
        self.replicas = ReplicaGauge()

    async def record(self, updates: list[tuple]) -> int:
        return self.store.apply(updates)

    async def render(self) -> bytes:
        try:
            app = serve.get_replica_context().app_name
            states = await asyncio.wait_for(asyncio.to_thread(replica_states, app), timeout=2.0)
            if states is not None:
                self.store.apply(self.replicas.updates(states))
        except Exception:  # noqa: BLE001 - a slow or failing controller must not break /metrics
            logger.warning("metrics hub: replica counts unavailable", exc_info=True)
        return self.store.render()

    async def ready(self) -> dict[str, Any]:
        return {"batches": self.store.batches, "rejected": self.store.rejected, "uptime_s": time.time() - self.started}

"""``MetricsHub``: owns the prometheus-client registry every replica's Recorder flushes into.

On every render it also sets ``steadyrank_deployment_replicas{deployment, state}`` from the host's
status of this application (``read_states``: on Ray Serve
:func:`serve.server.hosting.health.this_app_replica_states`); a state seen before and now gone
(``STARTING`` once the replica runs) is set back to 0, so a scrape shows every count. That status
is one call to the Serve controller, and ``/metrics`` is open by default: it is read at most
once per :data:`REPLICA_STATES_TTL_S` seconds (concurrent renders wait for the one read in progress;
a failed or slow read is not retried before the TTL either), so a scrape storm costs the controller
nothing more and the replica counts are at most that old.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from steadyrank.serve.telemetry import MetricsStore

logger = logging.getLogger(__name__)

REPLICAS_METRIC = "steadyrank_deployment_replicas"
#: Seconds a read of the application's replica states is reused by /metrics renders (module docstring).
REPLICA_STATES_TTL_S = 5.0
#: Seconds one read of the replica states may take before a render goes on without it.
REPLICA_STATES_TIMEOUT_S = 2.0

T = TypeVar("T")

#: ``{deployment: (status, {replica state: count})}``
ReplicaStates = dict[str, tuple[str, dict[str, int]]]


class TtlCache(Generic[T]):
    """The last answer of an async ``fetch``, reused for ``ttl_s`` seconds (``clock``: seconds,
    monotonic). Callers that arrive during a fetch wait for it (one fetch in flight); a fetch that
    fails raises to its caller, and the callers until ``ttl_s`` after it get the previous answer
    (None before the first success)."""

    def __init__(self, fetch: Callable[[], Awaitable[T]], ttl_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.fetch, self.ttl_s, self.clock = fetch, ttl_s, clock
        self.value: T | None = None
        self.fetched_at: float | None = None
        self.lock = asyncio.Lock()

    async def get(self) -> T | None:
        async with self.lock:
            if self.fetched_at is None or self.clock() - self.fetched_at >= self.ttl_s:
                self.fetched_at = self.clock()  # before the fetch: a failing one is not retried within ttl_s
                self.value = await self.fetch()
            return self.value


class ReplicaGauge:
    """Successive :data:`ReplicaStates` as ``set`` updates of ``steadyrank_deployment_replicas``."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, str]] = set()

    def updates(self, states: ReplicaStates) -> list[tuple[str, str, tuple[str, ...], float]]:
        counts = {(name, state): n for name, (_, by_state) in states.items() for state, n in by_state.items()}
        self._seen |= set(counts)
        return [("set", REPLICAS_METRIC, key, float(counts.get(key, 0))) for key in sorted(self._seen)]


class MetricsHub:
    """``record(updates)`` from Recorders, ``render()`` for ``/metrics``. ``read_states``: the
    application's replica states, read from the host (blocking; None: no replica gauge)."""

    def __init__(self, read_states: Callable[[], ReplicaStates | None] | None = None) -> None:
        self.store = MetricsStore()
        self.started = time.time()
        self.replicas = ReplicaGauge()
        self.read_states = read_states
        self.replica_states = TtlCache(self._read_replica_states, REPLICA_STATES_TTL_S)

    async def _read_replica_states(self) -> ReplicaStates | None:
        if self.read_states is None:
            return None
        return await asyncio.wait_for(asyncio.to_thread(self.read_states), timeout=REPLICA_STATES_TIMEOUT_S)

    async def record(self, updates: list[tuple]) -> int:
        return self.store.apply(updates)

    async def render(self) -> bytes:
        try:
            states = await self.replica_states.get()
            if states is not None:
                self.store.apply(self.replicas.updates(states))
        except Exception:  # noqa: BLE001 - a slow or failing controller must not break /metrics
            logger.warning("metrics hub: replica counts unavailable", exc_info=True)
        return self.store.render()

    async def ready(self) -> dict[str, Any]:
        return {"batches": self.store.batches, "rejected": self.store.rejected, "uptime_s": time.time() - self.started}

"""``MetricsHub``: owns the prometheus-client registry every replica's Recorder flushes into."""

from __future__ import annotations

import time
from typing import Any

from ray import serve

from steadyrank.serve.telemetry import MetricsStore


@serve.deployment(name="MetricsHub", num_replicas=1)
class MetricsHub:
    """``record(updates)`` from Recorders, ``render()`` for ``/metrics``."""

    def __init__(self) -> None:
        self.store = MetricsStore()
        self.started = time.time()

    async def record(self, updates: list[tuple]) -> int:
        return self.store.apply(updates)

    async def render(self) -> bytes:
        return self.store.render()

    async def ready(self) -> dict[str, Any]:
        return {"batches": self.store.batches, "rejected": self.store.rejected, "uptime_s": time.time() - self.started}

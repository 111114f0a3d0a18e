"""The shadow evaluator as a Ray Serve deployment: one low-concurrency replica off the request path.

Bound by the application builder as
``ShadowEvaluator.bind(quality_settings, searcher_handle, metrics_hub_handle, variants)``.
It replays golden queries through the Searcher (the same handles and routing users get) every
``interval_s``, evaluates mirrored responses the ingress hands it after replying, and exports the
golden and canary gauges through the metrics hub.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ray import serve
from ray.serve.handle import DeploymentHandle

from steadyrank.serve.contracts import SearchCall
from steadyrank.serve.quality.golden import load_golden
from steadyrank.serve.quality.service import QualityService
from steadyrank.serve.quality.settings import QualitySettings
from steadyrank.serve.telemetry import MetricsStore, Recorder


@serve.deployment(
    num_replicas=1,
    max_ongoing_requests=8,
    max_queued_requests=32,  # mirrored events beyond this are dropped, never queued without bound
    ray_actor_options={"num_cpus": 0.05},
)
class ShadowEvaluator:
    """Golden replays, live mirroring and canary reports (see ``serve.quality.service``)."""

    def __init__(self, settings: QualitySettings | dict, searcher: DeploymentHandle,
                 hub: DeploymentHandle | MetricsStore, variants: Sequence[str] = ("primary",)) -> None:
        """Runs on the replica's event loop (Ray Serve calls a constructor there; so does the
        colocated Ingress, :mod:`serve.app.colocated`), where the replay loop starts."""
        settings = QualitySettings.model_validate(settings)
        golden = load_golden(settings.golden, split=settings.golden_split, grade_map=settings.grade_map)

        async def search(request: SearchCall) -> dict:
            return (await searcher.search.remote(request)).model_dump()

        self.service = QualityService(settings, golden, search, Recorder(hub), variants)
        self._replays = asyncio.get_running_loop().create_task(self.service.run_forever())

    async def mirror(self, event: dict[str, Any]) -> None:
        await self.service.mirror(event)

    async def replay_now(self) -> int:
        """Run one replay round at once (used by tests and operators); returns evaluations made."""
        return await self.service.replay_round()

    async def canary_report(self) -> dict:
        return self.service.canary_report()

    async def status(self) -> dict:
        return self.service.status()

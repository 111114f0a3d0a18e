"""The shadow evaluator component: off the request path (split layout: one low-concurrency replica,
:data:`serve.server.hosting.graph.EVALUATOR_DEFAULTS`).

Built by the composition root (:mod:`serve.server.hosting.graph`) as
``ShadowEvaluator(quality_settings, searcher_handle, metrics_hub_handle, variants, profile)``
(``profile``: the :class:`~serve.server.quality.service.GoldenProfile` of the server's search defaults).
It replays golden queries through the Searcher (the same handles and routing users get) every
``interval_s``, evaluates mirrored responses the ingress hands it after replying, and exports the
golden and canary gauges through the metrics hub. With ``quality.probes.enabled`` it also replays the
live Δ-margin probes (:mod:`serve.server.quality.probes`) through the Searcher's ``probe_keys``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from steadyrank.serve.server.calls import SearchCall, Variant
from steadyrank.serve.server.quality.golden_sets import load_golden
from steadyrank.serve.server.quality.probes import LiveProbes
from steadyrank.serve.server.quality.service import GoldenProfile, QualityService
from steadyrank.serve.settings.quality import QualitySettings
from steadyrank.serve.telemetry import MetricsStore, Recorder


class ShadowEvaluator:
    """Golden replays, live mirroring and canary reports (see ``serve.server.quality.service``)."""

    def __init__(self, settings: QualitySettings | dict, searcher: Any, hub: Any | MetricsStore,
                 variants: Sequence[Variant], profile: GoldenProfile) -> None:
        """``searcher``, ``hub``: handles to the Searcher and the MetricsHub (a handle's call shape,
        ``handle.method.remote(...)``), or the hub's in-process store. Runs on the replica's event
        loop (Ray Serve calls a constructor there; so does the colocated Ingress,
        :mod:`serve.server.hosting.colocated`), where the replay loop starts."""
        settings = QualitySettings.model_validate(settings)
        golden = load_golden(settings.golden, split=settings.golden_split, grade_map=settings.grade_map)

        async def search(request: SearchCall) -> dict:
            return (await searcher.search.remote(request)).model_dump()

        self.service = QualityService(settings, golden, search, Recorder(hub), variants, profile=profile)
        self._replays = asyncio.get_running_loop().create_task(self.service.run_forever())
        self.probes: LiveProbes | None = None
        if settings.probes.enabled:
            def similarity(variant: str):
                async def keys(items: list[tuple[str, list[str]]]) -> list:
                    return await searcher.probe_keys.remote(variant, items)
                return keys

            self.probes = LiveProbes(settings.probes, similarity, Recorder(hub), variants)
            self._probe_rounds = asyncio.get_running_loop().create_task(self.probes.run_forever())

    async def mirror(self, event: dict[str, Any]) -> None:
        await self.service.mirror(event)

    async def replay_now(self) -> int:
        """Run one replay round at once (used by tests and operators); returns evaluations made."""
        return await self.service.replay_round()

    async def probe_now(self) -> dict:
        """Run one live probe round at once (tests, operators): ``{variant: {ablation: {probe: margin}}}``."""
        if self.probes is None:
            raise ValueError("live probes are off (quality.probes.enabled)")
        return await self.probes.round()

    async def canary_report(self) -> dict:
        return self.service.canary_report()

    async def status(self) -> dict:
        return self.service.status()

    async def segment_routes(self) -> dict:
        """The segments the HTTP edge routes apart: ``refused`` (to the primary), ``bypassed`` (no reranker)."""
        return self.service.segment_routes()

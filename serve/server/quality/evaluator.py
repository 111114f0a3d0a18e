"""The shadow evaluator component: off the request path (split layout: one low-concurrency replica,
:data:`serve.server.hosting.graph.EVALUATOR_DEFAULTS`).

Built by the composition root (:mod:`serve.server.hosting.graph`) as
``ShadowEvaluator(quality_settings, searcher_handle, metrics_hub_handle, variants, profile)``
(``profile``: the :class:`~serve.server.quality.service.GoldenProfile` of the server's search defaults).
It replays golden queries through the Searcher (the same handles and routing users get) every
``interval_s``, evaluates mirrored responses the ingress hands it after replying, and exports the
golden and canary gauges through the metrics hub. With ``quality.probes.enabled`` it also replays the
live Δ-margin probes (:mod:`serve.server.quality.probes`) through the Searcher's ``probe_keys``.
With ``quality.live_judging.enabled`` it judges sampled served rankings
(:mod:`serve.server.quality.live_judging`) with the judge ``judge`` builds (a factory the composition
root passes: the judges live in ``serve.tools.golden.judges``, above this layer). With
``quality.drift.enabled`` it samples mirrored queries for golden drift
(:mod:`serve.server.quality.drift_monitor`), embedded through the Searcher's ``query_vectors``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from steadyrank.serve.server.calls import SearchCall, Variant
from steadyrank.serve.server.quality.drift_monitor import DriftMonitor
from steadyrank.serve.server.quality.golden_sets import load_golden
from steadyrank.serve.server.quality.live_judging import JudgeFactory, LiveJudging
from steadyrank.serve.server.quality.probes import LiveProbes
from steadyrank.serve.server.quality.service import GoldenProfile, QualityService
from steadyrank.serve.settings.quality import QualitySettings
from steadyrank.serve.telemetry import MetricsStore, Recorder


class ShadowEvaluator:
    """Golden replays, live mirroring and canary reports (see ``serve.server.quality.service``)."""

    def __init__(self, settings: QualitySettings | dict, searcher: Any, hub: Any | MetricsStore,
                 variants: Sequence[Variant], profile: GoldenProfile, judge: JudgeFactory | None = None) -> None:
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
        self.live: LiveJudging | None = None
        if settings.live_judging.enabled:
            if judge is None:
                raise ValueError("quality.live_judging is enabled but no judge was given")
            self.live = LiveJudging(settings.live_judging, judge, Recorder(hub), search, variants)
            self._live_worker = asyncio.get_running_loop().create_task(self.live.run_forever())

        self.drift: DriftMonitor | None = None
        if settings.drift.enabled:
            async def query_vectors(texts: list[str]):
                return await searcher.query_vectors.remote(texts)

            self.drift = DriftMonitor(settings, golden, query_vectors, Recorder(hub))
            self._drift_rounds = asyncio.get_running_loop().create_task(self.drift.run_forever())

    async def mirror(self, event: dict[str, Any]) -> None:
        """Evaluate a served search (golden match, canary copy); its ``live_sample``, when the ingress
        sent one, is offered to live judging first and its query to golden drift (neither waits)."""
        if self.live is not None and event.get("live_sample"):
            self.live.offer(event["live_sample"])
        if self.drift is not None:
            self.drift.offer(event["query"])
        await self.service.mirror(event)

    async def judge_live(self, event: dict[str, Any]) -> None:
        """Offer a served ranking (``event``: a ``/v1/rerank`` answer's live sample) to live judging
        (nothing when it is off)."""
        if self.live is not None:
            self.live.offer(event)

    async def drift_now(self) -> dict:
        """Run one golden-drift round at once (tests, operators); returns the ``drift`` status section."""
        if self.drift is None:
            raise ValueError("golden drift is off (quality.drift.enabled)")
        await self.drift.round()
        return self.drift.status()

    async def drift_proposals(self, n: int | None = None) -> dict:
        """Uncovered live queries proposed as golden queries (:meth:`DriftMonitor.proposals`)."""
        if self.drift is None:
            return {"proposals": [], "reason": "golden drift is off (quality.drift.enabled: false)"}
        return await self.drift.proposals(n)

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
        live = {"enabled": False} if self.live is None else self.live.status()
        drift = {"enabled": False} if self.drift is None else self.drift.status()
        return {**self.service.status(), "live_judging": live, "drift": drift}

    async def segment_routes(self) -> dict:
        """The segments the HTTP edge routes apart: ``refused`` (to the primary), ``bypassed`` (no reranker)."""
        return self.service.segment_routes()

"""Live Δ-margin probes: the shadow evaluator replays a small probe bundle set on a schedule.

Every round, for each reranker variant (``primary`` and, when configured, ``canary``), every bundle
of the set (``quality.probes``: ``queries`` per language, deterministic from ``seed``) is scored
under ``base`` and the configured ablations through that variant's reranker as shadow work, and the
mean margins are exported: ``steadyrank_probe_margin{probe=name|topic|both, ablation, variant}``
(rank-key units, :mod:`serve.tools.probes.margins`), with the configured floors as
``steadyrank_probe_margin_floor{probe}``. The alert ``SteadyrankProbeMarginEroded``
(deploy/prometheus/rules.yml) compares them. Scheduled rounds are counted in
``steadyrank_probe_rounds_total{outcome=ok|failed}``; a failed round is logged and retried next round.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

import numpy as np

from steadyrank.serve.settings.quality import ProbeSettings
from steadyrank.serve.tools.probes.ablations import parse_ablations
from steadyrank.serve.tools.probes.bundles import default_templates, generate
from steadyrank.serve.tools.probes.margins import MARGINS
from steadyrank.serve.tools.probes.run import Similarity, run_probes

logger = logging.getLogger("steadyrank.quality")


class LiveProbes:
    """``similarity(variant)``: the :data:`~serve.tools.probes.run.Similarity` of that variant's reranker."""

    def __init__(self, settings: ProbeSettings, similarity: Callable[[str], Similarity], recorder,
                 variants: Sequence[str] = ("primary",)) -> None:
        self.settings, self.similarity, self.recorder = settings, similarity, recorder
        self.variants = tuple(variants)
        self.ablations = parse_ablations(",".join(settings.ablations))
        self.templates = default_templates()
        self.bundles = [b for lang in settings.languages for b in generate(settings.queries, lang, settings.seed)]
        self.rounds = 0
        self.failures = 0
        self.last: dict[str, dict[str, dict[str, float]]] = {}

    async def round(self) -> dict[str, dict[str, dict[str, float]]]:
        """One round over every variant; returns ``{variant: {ablation: {probe: mean margin}}}``."""
        self.recorder.set("steadyrank_probe_margin_floor", self.settings.floor_name, probe="name")
        self.recorder.set("steadyrank_probe_margin_floor", self.settings.floor_topic, probe="topic")
        out: dict[str, dict[str, dict[str, float]]] = {}
        for variant in self.variants:
            rows = await run_probes(self.bundles, self.ablations, self.similarity(variant), self.templates,
                                    seed=self.settings.seed)
            means: dict[str, dict[str, float]] = {}
            for ablation in self.ablations:
                chosen = [r.margins for r in rows if r.ablation == ablation]
                means[ablation] = {m: float(np.mean([getattr(x, m) for x in chosen])) for m in MARGINS}
                for probe, value in means[ablation].items():
                    self.recorder.set("steadyrank_probe_margin", value, probe=probe, ablation=ablation, variant=variant)
            out[variant] = means
        self.rounds += 1
        self.last = out
        return out

    async def run_forever(self) -> None:
        """A round every ``interval_s`` seconds (the first at once), until cancelled."""
        while True:
            try:
                await self.round()
            except Exception:  # noqa: BLE001 - the loop must survive anything
                self.failures += 1
                self.recorder.inc("steadyrank_probe_rounds_total", outcome="failed")
                logger.exception("live probe round failed")
            else:
                self.recorder.inc("steadyrank_probe_rounds_total", outcome="ok")
            await asyncio.sleep(self.settings.interval_s)

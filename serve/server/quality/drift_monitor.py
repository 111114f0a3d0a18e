"""The golden-drift monitor of the shadow evaluator: samples live queries, embeds them off the
request path, keeps a bounded window of their placements and exports the drift gauges.

The request path pays one call of :meth:`DriftMonitor.offer` per mirrored search (after the reply
was sent): a random draw and, for a sampled query, an append to a queue bounded by
``quality.drift.max_pending`` (a sample that finds it full is dropped and counted). Every
``quality.drift.interval_s`` a round embeds the queue through the Searcher's shadow embedding
(``batch_size`` queries per call, behind user work on the embedder), places each query against the
golden geometry (:mod:`.drift`: its distance to the golden set and its topic, on a worker thread) and
keeps the placement in a window of the latest ``quality.drift.window`` samples. The golden geometry
(spread, k-means topics) is built once, in the first round, from the golden queries' embeddings.

Memory: per sample a distance and a topic; with ``quality.log_queries`` also its text and FP32
embedding (``window × dim × 4`` bytes), which ``golden build --from-traffic`` proposes from.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from steadyrank.serve.server.quality.drift import UNCOVERED, DriftReport, GoldenGeometry, representatives
from steadyrank.serve.server.quality.golden_sets import GoldenSet, normalise_query
from steadyrank.serve.server.quality.service import Recorder
from steadyrank.serve.settings.quality import QualitySettings

logger = logging.getLogger("steadyrank.quality")
EmbedFn = Callable[[list[str]], Awaitable[np.ndarray]]  # query texts → FP32 unit rows (shadow work)
SAMPLE_OUTCOMES = ("embedded", "dropped", "failed")


@dataclass(frozen=True)
class Sample:
    """One sampled live query, placed: distance to the golden set, topic (-1 = uncovered); its text
    and embedding only with ``quality.log_queries``."""

    distance: float
    topic: int
    text: str | None = None
    vector: np.ndarray | None = None


class DriftMonitor:
    """Sampling, the bounded window, rounds, gauges, ``/v1/quality``'s ``drift`` section, proposals."""

    def __init__(self, settings: QualitySettings, golden: GoldenSet, embed: EmbedFn, recorder: Recorder) -> None:
        self.settings, self.keep_text = settings.drift, settings.log_queries
        self.golden, self.embed, self.recorder = golden, embed, recorder
        self.rng = random.Random(self.settings.seed)
        self.pending: deque[str] = deque()
        self.window: deque[Sample] = deque(maxlen=self.settings.window)
        self.geometry: GoldenGeometry | None = None
        self.report: DriftReport | None = None
        self.counts = {"offered": 0, **dict.fromkeys(SAMPLE_OUTCOMES, 0), "rounds": 0}

    # --- on the mirror hand-off: O(1), no await -------------------------------------------
    def offer(self, query: str) -> None:
        """Sample ``query`` with probability ``sample_fraction`` into the bounded pending queue."""
        self.counts["offered"] += 1
        if not self.rng.random() < self.settings.sample_fraction:
            return
        if len(self.pending) >= self.settings.max_pending:
            self._count("dropped", 1)
            return
        self.pending.append(query)

    def _count(self, outcome: str, n: int) -> None:
        self.counts[outcome] += n
        self.recorder.inc("steadyrank_golden_drift_samples_total", float(n), outcome=outcome)

    # --- rounds ---------------------------------------------------------------------------
    async def _embed_batches(self, texts: list[str]) -> np.ndarray:
        parts = [await self.embed(texts[i:i + self.settings.batch_size])
                 for i in range(0, len(texts), self.settings.batch_size)]
        return np.concatenate(parts) if parts else np.zeros((0, 0), np.float32)

    async def _geometry(self) -> GoldenGeometry:
        if self.geometry is None:
            vectors = await self._embed_batches([q.query for q in self.golden.queries.values()])
            s = self.settings
            self.geometry = await asyncio.to_thread(GoldenGeometry.build, vectors, clusters=s.clusters,
                                                    quantile=s.spread_quantile, seed=s.seed)
        return self.geometry

    async def round(self) -> DriftReport | None:
        """Embed and place the pending samples, refresh the report and the gauges; the report (None
        below ``min_samples``)."""
        geometry = await self._geometry()
        while self.pending:
            batch = [self.pending.popleft() for _ in range(min(self.settings.batch_size, len(self.pending)))]
            try:
                vectors = await self.embed(batch)
            except Exception as exc:  # noqa: BLE001 - counted and logged; the round goes on next time
                self._count("failed", len(batch))
                logger.warning("drift embedding of %d sampled queries failed: %s: %s", len(batch),
                               type(exc).__name__, exc)
                break
            distances, topics = await asyncio.to_thread(geometry.place, vectors)
            for i, text in enumerate(batch):
                kept = (text, vectors[i]) if self.keep_text else (None, None)
                self.window.append(Sample(float(distances[i]), int(topics[i]), *kept))
            self._count("embedded", len(batch))
        self.counts["rounds"] += 1
        if len(self.window) >= self.settings.min_samples:
            self.report = DriftReport.measure(geometry, np.array([s.distance for s in self.window]),
                                              np.array([s.topic for s in self.window]))
        self.export()
        return self.report

    async def run_forever(self) -> None:
        """A round every ``interval_s`` seconds, until cancelled."""
        while True:
            await asyncio.sleep(self.settings.interval_s)
            try:
                await self.round()
            except Exception:  # noqa: BLE001 - the loop must survive anything
                logger.exception("golden drift round failed")

    # --- exports --------------------------------------------------------------------------
    def export(self) -> None:
        """Set the ``steadyrank_golden_drift_*`` gauges (shares only once ``min_samples`` are in)."""
        rec = self.recorder
        rec.set("steadyrank_golden_drift_window_queries", float(len(self.window)))
        if self.geometry is not None:
            rec.set("steadyrank_golden_drift_spread", self.geometry.spread)
        report = self.report
        if report is None:
            return
        for stat, value in (("mean", report.distance_mean), ("p50", report.distance_p50), ("p95", report.distance_p95)):
            rec.set("steadyrank_golden_drift_distance", value, stat=stat)
        rec.set("steadyrank_golden_drift_beyond_ratio", report.beyond_share)
        rec.set("steadyrank_golden_drift_topic_distance", report.topic_distance)
        for topic, share in report.live_shares.items():
            rec.set("steadyrank_golden_drift_topic_share", share, topic=topic, source="live")
        for topic, share in report.golden_shares.items():
            rec.set("steadyrank_golden_drift_topic_share", share, topic=topic, source="golden")

    def status(self) -> dict[str, Any]:
        """The ``drift`` section of ``GET /v1/quality``."""
        s, geometry, report = self.settings, self.geometry, self.report
        out: dict[str, Any] = {
            "enabled": True, "sample_fraction": s.sample_fraction, "log_queries": self.keep_text,
            "window": {"n": len(self.window), "size": s.window, "min_samples": s.min_samples},
            "pending": len(self.pending), "samples": dict(self.counts),
            "golden": None if geometry is None else {
                "queries": len(geometry.vectors), "spread": geometry.spread, "spread_quantile": geometry.quantile,
                "clusters": len(geometry.centroids)},
        }
        if report is None:
            out["report"] = None
            out["reason"] = (f"{len(self.window)} sampled live queries placed, {s.min_samples} needed"
                             if geometry is not None else "the golden geometry is built in the first drift round")
            return out
        out["report"] = {
            "n": report.n, "distance": {"mean": report.distance_mean, "p50": report.distance_p50,
                                        "p95": report.distance_p95},
            "beyond_share": report.beyond_share, "topic_distance": report.topic_distance,
            "topics": [{"topic": t, "live": report.live_shares[t], "golden": report.golden_shares.get(t, 0.0)}
                       for t in report.live_shares],
        }
        return out

    async def proposals(self, n: int | None = None) -> dict[str, Any]:
        """Up to ``n`` (default ``quality.drift.proposals``) uncovered live queries to judge as new golden
        queries: the uncovered samples of the window (distinct normalised texts, the latest of each)
        clustered, the sample nearest each cluster's centre, largest clusters first; ``support``: the
        distinct uncovered queries of its cluster, ``support_share``: that over all distinct uncovered
        ones. Empty, with the reason, unless ``quality.log_queries`` is on."""
        n = self.settings.proposals if n is None else min(n, self.settings.proposals)
        base: dict[str, Any] = {"proposals": [], "window": len(self.window),
                                "spread": None if self.geometry is None else self.geometry.spread}
        if not self.keep_text:
            return {**base, "reason": "quality.log_queries is off: sampled live queries are not kept, only their "
                                      "distances (set quality.log_queries: true to allow keeping them)"}
        latest: dict[str, Sample] = {}
        for sample in self.window:
            if sample.topic < 0 and sample.text is not None:
                latest.pop(normalise_query(sample.text), None)
                latest[normalise_query(sample.text)] = sample
        uncovered = list(latest.values())
        if not uncovered:
            return {**base, "reason": f"none of the {len(self.window)} sampled live queries in the window lies "
                                      f"beyond the golden spread ({UNCOVERED}: 0)"}
        vectors = np.stack([s.vector for s in uncovered if s.vector is not None])
        picks = await asyncio.to_thread(representatives, vectors, n, seed=self.settings.seed)
        return {**base, "uncovered": len(uncovered), "proposals": [
            {"query": uncovered[i].text, "distance": uncovered[i].distance, "support": size,
             "support_share": size / len(uncovered)} for i, size in picks]}

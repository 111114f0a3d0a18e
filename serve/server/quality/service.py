"""The shadow evaluator's logic: golden replays, live mirroring, exports, canary reports.

It is independent of Ray: ``search`` is any async callable taking a search request dict and
returning the Searcher's response (``candidates`` = the full reranked list in served order with
``id`` and ``relevance_score``; ``meta`` with ``escalated``), and ``recorder`` any object with
``inc``/``set`` (``serve.telemetry.Recorder``). The Ray Serve deployment wraps it.

Replays are marked ``shadow`` so the server does not count them as user traffic. A failed replay
is counted (``steadyrank_golden_failures_total``), logged, and retried in the next round; the
loop itself never stops on an error.

One client cannot steer the window (issue 36). It holds distinct golden queries, so repeating one
golden query refreshes that query's entry and never multiplies it (:class:`~.monitor.QualityWindow`).
And a mirrored search counts as a golden evaluation only when it ran under the settings the replays
run under (:class:`GoldenProfile`: the server's default ``mode`` and ``denoise``): a request that
names another mode or denoiser is not evaluated (``mirror_skipped_settings`` counts it), since its
ranking answers another question than the one the golden window measures. Its ``top_n`` is the
user's (the window judges the rankings users are served); canary copies repeat the request's
``top_n``, ``mode`` and ``denoise``, so the agreement compares two rankings of one request.
Agreement is kept per distinct normalised query too (the last ``window`` of them).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from steadyrank.metrics import parse_measure
from steadyrank.retrieval.modes import Mode
from steadyrank.retrieval.rewrite import DenoiseMode
from steadyrank.serve.server.calls import SearchCall, Variant
from steadyrank.serve.server.quality.canary import VERDICTS, Agreement, agreement, compare
from steadyrank.serve.server.quality.golden_sets import GoldenQuery, GoldenSet, normalise_query
from steadyrank.serve.server.quality.monitor import QUALITY_STATS, GoldenEvaluation, QualityWindow, evaluate_ranking
from steadyrank.serve.server.quality.segment_verdicts import canary_segments, reranker_segments
from steadyrank.serve.server.quality.segments import SegmentRegistry
from steadyrank.serve.settings.quality import QualitySettings

logger = logging.getLogger("steadyrank.quality")
SearchFn = Callable[[SearchCall], Awaitable[dict]]  # the Searcher's call → its outcome as a mapping
#: The window's arm of the first stage's order of a golden replay (``quality.segments.rerank_guard``).
FIRST_STAGE = "first_stage"


class Recorder(Protocol):
    def inc(self, name: str, value: float = 1.0, **labels: str) -> None: ...
    def set(self, name: str, value: float, **labels: str) -> None: ...


def served_candidates(response: dict) -> list[tuple[str, float]]:
    """(doc id, score) of every reranked candidate, in served order."""
    return [(str(c["id"]), float(c["relevance_score"])) for c in response["candidates"]]


@dataclass(frozen=True)
class GoldenProfile:
    """The search settings golden evaluations run under: the server's ``search.default_mode`` and
    ``search.denoise``. Replays name them; a mirrored request counts only when its own ``mode`` and
    ``denoise`` (unset = the server's default) are these."""

    mode: Mode
    denoise: DenoiseMode

    def admits(self, request: dict[str, Any]) -> bool:
        """Whether a search request (a :class:`SearchCall` as a mapping) ran under this profile."""
        return (request.get("mode") or self.mode, request.get("denoise") or self.denoise) == (self.mode, self.denoise)

    def to_json(self) -> dict[str, str]:
        return {"mode": self.mode, "denoise": self.denoise}


class QualityService:
    """Golden evaluation of the live search path, per variant (``primary`` and optionally ``canary``)."""

    def __init__(self, settings: QualitySettings, golden: GoldenSet, search: SearchFn, recorder: Recorder,
                 variants: Sequence[Variant] = ("primary",), *, profile: GoldenProfile) -> None:
        self.settings, self.golden, self.search, self.recorder = settings, golden, search, recorder
        self.variants, self.profile = tuple(variants), profile
        self.window = QualityWindow(settings.window)
        self.agreements: OrderedDict[str, Agreement] = OrderedDict()  # normalised query → its latest agreement
        self.rng = random.Random(settings.seed)
        self.retry: dict[str, GoldenQuery] = {}
        self.counts = {"replayed": 0, "mirrored": 0, "failures": 0, "rounds": 0, "golden_id_ignored": 0,
                       "mirror_skipped_settings": 0}
        self.last_success: float | None = None
        self.segments = SegmentRegistry(settings.segments.max_segments, golden.segments())
        self.segment_verdicts: dict[str, Any] = {}
        self.routes: dict[str, list[str]] = {"refused": [], "bypassed": []}

    # --- golden replays -------------------------------------------------------------------
    def _sample(self) -> list[GoldenQuery]:
        """Queries that failed last time first, then a random sample, ``sample_size`` in all."""
        chosen = list(self.retry.values())[: self.settings.sample_size]
        others = [q for q in self.golden.queries.values() if q.query_id not in self.retry]
        room = min(self.settings.sample_size - len(chosen), len(others))
        return chosen + self.rng.sample(others, room)

    def _call(self, query: str, variant: Variant, request: dict[str, Any] | None = None, *,
              rerank: bool = True) -> SearchCall:
        """A shadow search of ``query`` through ``variant``: a replay's (the profile, ``quality.top_n``;
        ``rerank`` false: the first stage's order), or a copy of a mirrored ``request`` (its ``top_n``,
        ``mode`` and ``denoise``)."""
        if request is None:
            return SearchCall(query=query, top_n=self.settings.top_n, mode=self.profile.mode,
                              denoise=self.profile.denoise, shadow=True, variant=variant, rerank=rerank)
        return SearchCall(query=query, top_n=request.get("top_n"), mode=request.get("mode"),
                          denoise=request.get("denoise"), shadow=True, variant=variant)

    def _record(self, evaluation: GoldenEvaluation) -> None:
        """Put ``evaluation`` in the window (refreshing its query's entry) and count it."""
        self.window.add(evaluation)
        self.recorder.inc("steadyrank_golden_evaluations_total", variant=evaluation.variant, source=evaluation.source)
        self.last_success = time.time()
        self.recorder.set("steadyrank_golden_last_success_timestamp_seconds", self.last_success,
                          variant=evaluation.variant)

    def _failed(self, variant: str, what: str, exc: Exception) -> None:
        self.counts["failures"] += 1
        self.recorder.inc("steadyrank_golden_failures_total", variant=variant)
        logger.warning("golden %s failed: %s: %s", what, type(exc).__name__, exc)

    async def _evaluate(self, query: GoldenQuery, variant: str, source: str,
                        call: SearchCall) -> list[tuple[str, float]] | None:
        """Run ``call`` (a search of ``query``) and record its evaluation; None (and counted) on failure."""
        started = time.perf_counter()
        try:
            response = await self.search(call)
            candidates = served_candidates(response)
            evaluation = evaluate_ranking(query, candidates, variant=variant, source=source,
                                          escalated=bool(response.get("meta", {}).get("escalated", False)),
                                          latency_s=time.perf_counter() - started)
        except Exception as exc:  # noqa: BLE001 - any failure is counted, logged and retried
            if source == "replay":
                self.retry[query.query_id] = query
            self._failed(variant, f"{source} {variant} of {query.query_id}", exc)
            return None
        self._record(evaluation)
        return candidates

    async def replay_round(self) -> int:
        """Replay a sample of golden queries through every variant, one request at a time."""
        succeeded = 0
        for query in self._sample():
            ok = [await self._evaluate(query, variant, "replay", self._call(query.query, variant)) is not None
                  for variant in self.variants]
            if self.settings.segments.rerank_guard:  # the primary's first stage, the reranker's baseline
                call = self._call(query.query, "primary", rerank=False)
                ok.append(await self._evaluate(query, FIRST_STAGE, "replay", call) is not None)
            if all(ok):
                self.retry.pop(query.query_id, None)
            succeeded += sum(ok)
        self.counts["replayed"] += succeeded
        self.counts["rounds"] += 1
        self.export()
        return succeeded

    async def run_forever(self) -> None:
        """A replay round every ``interval_s`` seconds, until cancelled."""
        while True:
            await asyncio.sleep(self.settings.interval_s)
            try:
                await self.replay_round()
            except Exception:  # noqa: BLE001 - the loop must survive anything
                logger.exception("golden replay round failed")

    # --- live mirroring -------------------------------------------------------------------
    def _golden_of(self, event: dict[str, Any]) -> GoldenQuery | None:
        """The golden query a mirrored search is an evaluation of (see :meth:`mirror`), if any."""
        golden = self.golden.match(event["query"])
        golden_id = event.get("golden_query_id")
        if golden_id:
            named = self.golden.queries.get(str(golden_id))
            if named is None:
                logger.warning("X-Golden-Query-Id %r is not in the golden set", str(golden_id)[:64])
            elif event.get("golden_trusted") or named is golden:
                golden = named
            else:  # another query's judgments would score these candidates: the header is ignored
                self.counts["golden_id_ignored"] += 1
                logger.debug("X-Golden-Query-Id %r ignored: the query is not its text", str(golden_id)[:64])
        if golden is not None and not self.profile.admits(event.get("request") or {}):
            self.counts["mirror_skipped_settings"] += 1  # another mode or denoiser: not this golden evaluation
            return None
        return golden

    async def mirror(self, event: dict[str, Any]) -> None:
        """Evaluate a served /v1/search response after it was sent.

        ``event``: ``query``, ``request`` (the :class:`SearchCall` as a mapping), ``candidates`` (the
        primary's full reranked list), ``meta``, optional ``golden_query_id`` (the
        ``X-Golden-Query-Id`` header), ``golden_trusted`` (sent with an admin key). The golden match
        is the golden query whose normalised text equals the query's; the header picks a golden query
        only when it names that same query, or when ``golden_trusted`` (else any client could score
        unrelated searches against a golden query's judgments). A match counts only when the request
        ran under :attr:`profile` (module docstring). It is evaluated with probability
        ``mirror_fraction``; with probability ``canary_fraction`` the canary ranks a copy of the
        request, for agreement and (on a counted golden match) the canary's own evaluation.
        """
        golden = self._golden_of(event)
        meta = event.get("meta", {})
        served = FIRST_STAGE if meta.get("reranked") is False else str(meta.get("variant", "primary"))
        primary = served_candidates(event)
        if golden is not None and primary and self.rng.random() < self.settings.mirror_fraction:
            try:
                self._record(evaluate_ranking(golden, primary, variant=served, source="mirror",
                                              escalated=bool(meta.get("escalated", False)),
                                              latency_s=float(event.get("latency_s", 0.0))))
                self.counts["mirrored"] += 1
            except ValueError as exc:
                self._failed(served, f"mirror of {golden.query_id}", exc)
        if served != "primary":  # served by the canary or the first stage: nothing to compare a copy with
            return
        if "canary" in self.variants and self.rng.random() < self.settings.canary_fraction:
            call = self._call(event["query"], "canary", event.get("request") or {})
            if golden is not None:
                canary = await self._evaluate(golden, "canary", "mirror", call)
            else:
                canary = await self._canary_ranking(call)
            if canary is not None and primary:
                key = normalise_query(event["query"])
                self.agreements.pop(key, None)  # a repeated query refreshes its agreement, never adds one
                self.agreements[key] = agreement(primary, canary)
                while len(self.agreements) > self.settings.window:
                    self.agreements.popitem(last=False)

    async def _canary_ranking(self, call: SearchCall) -> list[tuple[str, float]] | None:
        try:
            return served_candidates(await self.search(call))
        except Exception as exc:  # noqa: BLE001
            self.recorder.inc("steadyrank_golden_failures_total", variant="canary")
            logger.warning("canary copy failed: %s: %s", type(exc).__name__, exc)
            return None

    # --- reports and exports --------------------------------------------------------------
    def canary_report(self) -> dict:
        """The canary comparison (``serve.server.quality.canary.compare``) or a note that none is configured."""
        if "canary" not in self.variants:
            return {"verdict": None, "reasons": ["no canary variant is configured"], "paired_queries": 0}
        return compare(self.window.replays("primary"), self.window.replays("canary"),
                       self.settings.canary, list(self.agreements.values()), seed=self.settings.seed)

    def _segment_of(self, query_id: str) -> str:
        return self.segments.track(self.golden.queries[query_id].segment)

    def update_segments(self) -> dict[str, Any]:
        """Recompute the per-segment verdicts (:mod:`.segment_verdicts`) and the routes they imply
        (``refused``: canary verdict rollback under ``harm_guard``; ``bypassed``: the reranker loses to
        the first stage under ``rerank_guard``); log each route that changes."""
        rules, segments = self.settings.canary, self.settings.segments
        verdicts: dict[str, Any] = {}
        if "canary" in self.variants:
            verdicts["canary"] = canary_segments(self.window.replays("primary"), self.window.replays("canary"),
                                                 self._segment_of, rules, segments, seed=self.settings.seed)
        if segments.rerank_guard:
            verdicts["reranker"] = reranker_segments(self.window.replays(FIRST_STAGE), self.window.replays("primary"),
                                                     self._segment_of, rules, segments, seed=self.settings.seed)
        refused = sorted(s for s, r in verdicts.get("canary", {}).get("segments", {}).items()
                         if segments.harm_guard and r["verdict"] == "rollback")
        bypassed = sorted(s for s, r in verdicts.get("reranker", {}).get("segments", {}).items()
                          if segments.rerank_guard and r["loses"])
        routes = {"refused": refused, "bypassed": bypassed}
        for route, names in routes.items():
            for name in sorted(set(names) ^ set(self.routes[route])):
                on = name in names
                logger.warning("segment %s: %s %s", name, route if on else f"no longer {route}",
                               "(canary loses there: served by the primary)" if route == "refused"
                               else "(reranker loses to the first stage there: first-stage order served)")
                self.recorder.inc("steadyrank_segment_guard_changes_total", segment=name,
                                  guard="harm" if route == "refused" else "rerank", state="on" if on else "off")
        self.segment_verdicts, self.routes = verdicts, routes
        return verdicts

    def segment_routes(self) -> dict[str, Any]:
        """The segments' routes as last computed (:meth:`update_segments`): ``refused``, ``bypassed``."""
        return dict(self.routes)

    def status(self) -> dict:
        summaries = {v: self.window.summary(v) for v in self.variants}
        return {
            "golden_queries": len(self.golden), "variants": list(self.variants), **self.counts,
            "evaluation_settings": self.profile.to_json(), "agreement_queries": len(self.agreements),
            "last_success_unix_s": self.last_success, "pending_retries": sorted(self.retry),
            "windows": {v: {"n": s.n, "composition": self.window.composition(v), "quality": s.quality,
                            "tie_at_cutoff_rate": s.tie_at_cutoff_rate, "mean_tie_group_size": s.mean_tie_group_size,
                            "escalation_rate": s.escalation_rate,
                            "mean_k": s.mean_k, "latency_p50_s": s.latency_p50_s, "latency_p95_s": s.latency_p95_s}
                        for v, s in summaries.items()},
            "segments": {"tracked": self.segments.names(), "settings": self.settings.segments.model_dump(),
                         "verdicts": self.segment_verdicts, "routes": self.routes},
        }

    def export(self) -> None:
        """Set the golden and canary gauges from the current windows (NA values are left unset)."""
        for variant in self.variants:
            summary = self.window.summary(variant)
            window_gauges = (
                ("steadyrank_golden_ties_at_cutoff_ratio", summary.tie_at_cutoff_rate, {}),
                ("steadyrank_golden_tie_group_size_mean", summary.mean_tie_group_size, {}),
                ("steadyrank_golden_escalation_ratio", summary.escalation_rate, {}),
                ("steadyrank_golden_candidates_mean", summary.mean_k, {}),
                ("steadyrank_golden_latency_seconds", summary.latency_p50_s, {"quantile": "0.5"}),
                ("steadyrank_golden_latency_seconds", summary.latency_p95_s, {"quantile": "0.95"}),
            )
            for gauge, value, extra in window_gauges:
                if not np.isnan(value):
                    self.recorder.set(gauge, value, variant=variant, **extra)
            for name, stats in summary.quality.items():
                measure = parse_measure(name)
                labels = {"variant": variant, "metric": measure.name, "k": str(measure.k)}
                for stat in QUALITY_STATS:
                    if not np.isnan(stats[stat]):
                        self.recorder.set("steadyrank_golden_quality", stats[stat], stat=stat, **labels)
                for gauge, key in (("steadyrank_golden_proc", "proc"), ("steadyrank_golden_proc_ratio", "proc_ratio")):
                    if not np.isnan(stats[key]):
                        self.recorder.set(gauge, stats[key], **labels)
        if "canary" in self.variants:
            report = self.canary_report()
            for name, result in report.get("metrics", {}).items():
                measure = parse_measure(name)
                for bound, value in result["delta"].items():
                    if not np.isnan(value):
                        self.recorder.set("steadyrank_canary_delta", value, metric=measure.name, k=str(measure.k), bound=bound)
            for verdict in VERDICTS:
                self.recorder.set("steadyrank_canary_verdict", float(report["verdict"] == verdict), verdict=verdict)
        self._export_segments(self.update_segments())

    def _export_segments(self, verdicts: dict[str, Any]) -> None:
        """The per-segment gauges: canary verdicts, adjusted p-values, pairs, and the guards' state."""
        for segment, result in verdicts.get("canary", {}).get("segments", {}).items():
            for verdict in VERDICTS:
                self.recorder.set("steadyrank_segment_canary_verdict", float(result["verdict"] == verdict),
                                  segment=segment, verdict=verdict)
            self.recorder.set("steadyrank_segment_paired_queries", result["paired_queries"], segment=segment,
                              arm="canary")
            for name, test in result["metrics"].items():
                measure = parse_measure(name)
                for test_name in ("loss", "noninferior"):
                    self.recorder.set("steadyrank_segment_pvalue", test[f"p_{test_name}_adjusted"], segment=segment,
                                      arm="canary", test=test_name, metric=measure.name, k=str(measure.k))
        for segment, result in verdicts.get("reranker", {}).get("segments", {}).items():
            self.recorder.set("steadyrank_segment_paired_queries", result["paired_queries"], segment=segment,
                              arm="reranker")
            for name, test in result["metrics"].items():
                measure = parse_measure(name)
                self.recorder.set("steadyrank_segment_pvalue", test["p_loss_adjusted"], segment=segment,
                                  arm="reranker", test="loss", metric=measure.name, k=str(measure.k))
        for segment in self.segments.names():
            self.recorder.set("steadyrank_segment_guard_active", float(segment in self.routes["refused"]),
                              segment=segment, guard="harm")
            self.recorder.set("steadyrank_segment_guard_active", float(segment in self.routes["bypassed"]),
                              segment=segment, guard="rerank")

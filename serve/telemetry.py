"""Prometheus telemetry: one catalogue of every steadyrank metric, a hub that owns the registry, and
a buffering :class:`Recorder` every replica records through.

Replicas run in separate processes, so a process-local prometheus-client registry would only show
the ingress' own series. Instead:

- :data:`CATALOGUE` declares every metric once (name, type, help, label names, buckets); the names
  are the contract of ``deploy/prometheus/rules.yml`` and ``deploy/grafana/steadyrank.json``.
- The ``MetricsHub`` deployment (one replica, see :mod:`serve.server.components`) holds a
  :class:`MetricsStore`: a real ``CollectorRegistry`` built from the catalogue. ``GET /metrics``
  renders it with ``generate_latest``.
- Every replica records through a :class:`Recorder` (``inc``/``observe``/``set``). Calls are
  validated at once (unknown name, wrong label set or wrong operation → :class:`TelemetryError`),
  aggregated in a local buffer, and flushed to the hub by a background thread every
  ``flush_interval_s`` — never on a request's critical path. A failed flush is logged and its
  updates are dropped (metrics are best effort; requests never fail because of them).

>>> rec = Recorder(hub_handle)                       # inside a replica
>>> rec.inc("steadyrank_requests_total", endpoint="rerank", code="200", model="bge-reranker")
>>> rec.observe("steadyrank_request_duration_seconds", 0.012, endpoint="rerank", model="bge-reranker")
>>> rec.set("steadyrank_golden_quality", 0.71, variant="primary", metric="ndcg", k="10", stat="expected")
"""

from __future__ import annotations

import atexit
import difflib
import logging
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

logger = logging.getLogger("steadyrank.telemetry")

Kind = Literal["counter", "gauge", "histogram"]

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
STAGE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CANDIDATE_BUCKETS = (5, 10, 20, 30, 40, 50, 60, 75, 100, 150, 200, 500, 1000)
TIE_BUCKETS = (2, 3, 4, 5, 6, 8, 10, 15, 20, 50, 100)


class TelemetryError(ValueError):
    """A metric call that does not match the catalogue (unknown name, labels or operation)."""


@dataclass(frozen=True)
class MetricSpec:
    """One exported metric. ``name`` is the exposed name (counters end in ``_total``)."""

    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] | None = None


def _catalogue(*specs: MetricSpec) -> dict[str, MetricSpec]:
    out = {}
    for spec in specs:
        if not spec.name.startswith("steadyrank_"):
            raise AssertionError(f"{spec.name}: every metric name starts with steadyrank_")
        if (spec.kind == "counter") != spec.name.endswith("_total"):
            raise AssertionError(f"{spec.name}: counters, and only counters, end in _total")
        if (spec.kind == "histogram") != (spec.buckets is not None):
            raise AssertionError(f"{spec.name}: histograms, and only histograms, have buckets")
        out[spec.name] = spec
    return out


#: Every metric the application exports. Label values are strings (numbers are formatted by the caller).
CATALOGUE: dict[str, MetricSpec] = _catalogue(
    # --- serving (issue 5) --------------------------------------------------------------------
    MetricSpec("steadyrank_requests_total", "counter",
               "HTTP responses of the scoring endpoints by endpoint (rerank, rerank_v2, rerank_tei, search, "
               "embeddings, embed_tei), status code and model (the served model id the endpoint scores with; "
               "pipeline for search).",
               ("endpoint", "code", "model")),
    MetricSpec("steadyrank_requests_dropped_total", "counter",
               "Requests dropped before any model compute, by where (ingress, embedder, reranker, "
               "canary_reranker) and why: overloaded (refused at admission, 503), deadline (its deadline "
               "passed while queued, 504), disconnected (its caller gave up while queued), shutting_down "
               "(refused while the server drains for shutdown, 503).",
               ("deployment", "reason")),
    MetricSpec("steadyrank_request_retries_total", "counter",
               "Deployment calls made again because the replica serving them died or became unreachable, or "
               "their answer was lost with its node: "
               "by the ingress (reason replica_lost) or by the sharded Retriever for one shard's search "
               "(reason shard_replica_lost); the repeat goes to a live or replacement replica.",
               ("reason",)),
    MetricSpec("steadyrank_request_duration_seconds", "histogram",
               "Latency of user requests per endpoint and model, from request received to response ready.",
               ("endpoint", "model"), LATENCY_BUCKETS),
    MetricSpec("steadyrank_in_flight_requests", "gauge",
               "Scoring requests the ingress works on now (body read, response not yet complete).",
               ()),
    MetricSpec("steadyrank_queued_work_units", "gauge",
               "Work the ingress has admitted to a model deployment and not yet seen finish, by model "
               "(reranker: documents, embedder: texts).",
               ("model",)),
    MetricSpec("steadyrank_stage_duration_seconds", "histogram",
               "Time per pipeline stage (denoise, embed, retrieve, rerank, route) of user requests.",
               ("stage",), STAGE_BUCKETS),
    MetricSpec("steadyrank_batch_size", "histogram",
               "Requests per dynamic batch (one forward-pass plan) by deployment (embedder, reranker, canary_reranker).",
               ("deployment",), BATCH_BUCKETS),
    MetricSpec("steadyrank_candidates_reranked", "histogram",
               "Candidates reranked per user request (the K used by /v1/search, the documents of /v1/rerank).",
               (), CANDIDATE_BUCKETS),
    MetricSpec("steadyrank_route_decisions_total", "counter",
               "Dynamic-K routing decisions of user searches, by whether they escalated to k_high.",
               ("escalated",)),
    MetricSpec("steadyrank_escalations_total", "counter",
               "Escalations by reason (dense_margin, rerank_entropy, tie_at_top_n, overlap, route); "
               "one decision may carry several reasons.",
               ("reason",)),
    MetricSpec("steadyrank_tie_group_size_at_cutoff", "histogram",
               "Size of the tie group (exactly equal scores) straddling the top_n cutoff, when there is one.",
               (), TIE_BUCKETS),
    MetricSpec("steadyrank_ties_at_cutoff_total", "counter",
               "User rankings in which a tie group straddled the top_n cutoff (before boundary re-scoring).",
               ()),
    MetricSpec("steadyrank_rescored_ties_total", "counter",
               "Candidates of boundary tie groups re-scored with an FP32 forward pass (HPS) to settle the cutoff.",
               ()),
    # --- online quality (issue 6) -------------------------------------------------------------
    MetricSpec("steadyrank_golden_quality", "gauge",
               "Tie-aware golden-set quality over the evaluator's sliding window "
               "(stat: expected, min, max, range, bias, oblivious).",
               ("variant", "metric", "k", "stat")),
    MetricSpec("steadyrank_golden_proc", "gauge",
               "Pool-restricted oracle ceiling (PROC) of a golden metric over the window.",
               ("variant", "metric", "k")),
    MetricSpec("steadyrank_golden_proc_ratio", "gauge",
               "%PROC = actual / PROC of a golden metric over the window.",
               ("variant", "metric", "k")),
    MetricSpec("steadyrank_golden_evaluations_total", "counter",
               "Golden evaluations done, by variant and source (replay, mirror).",
               ("variant", "source")),
    MetricSpec("steadyrank_golden_failures_total", "counter",
               "Failed golden evaluations by variant (counted, logged, retried).",
               ("variant",)),
    MetricSpec("steadyrank_golden_last_success_timestamp_seconds", "gauge",
               "Unix time of the last successful golden evaluation, by variant.",
               ("variant",)),
    MetricSpec("steadyrank_golden_ties_at_cutoff_ratio", "gauge",
               "Share of the window's served golden rankings in which a tie group straddled rank 10.",
               ("variant",)),
    MetricSpec("steadyrank_golden_tie_group_size_mean", "gauge",
               "Mean size of the tie group straddling rank 10, over the window's rankings that had one.",
               ("variant",)),
    MetricSpec("steadyrank_golden_escalation_ratio", "gauge",
               "Share of the window's golden searches that dynamic-K routing escalated to k_high.",
               ("variant",)),
    MetricSpec("steadyrank_golden_candidates_mean", "gauge",
               "Mean number of candidates reranked (K) per golden search over the window.",
               ("variant",)),
    MetricSpec("steadyrank_golden_latency_seconds", "gauge",
               "Latency quantile (0.5, 0.95) of the window's golden searches as the evaluator saw them.",
               ("variant", "quantile")),
    MetricSpec("steadyrank_shadow_wait_seconds", "histogram",
               "How long a chunk of shadow work (golden replays, canary copies) waited on a model replica "
               "for user work to leave room, by deployment (reranker, canary_reranker, embedder).",
               ("deployment",), LATENCY_BUCKETS),
    MetricSpec("steadyrank_probe_margin", "gauge",
               "Live Δ-margin probes: mean margin of the probe bundle set in rank-key units (probe: name = "
               "s(C1) − max impostor, topic = s(C1) − s(wrong topic), both = s(C1) − s(both wrong)) per ablation "
               "(base, mask, near_miss, …) and reranker variant (docs/guides/probes.md).",
               ("probe", "ablation", "variant")),
    MetricSpec("steadyrank_probe_rounds_total", "counter",
               "Live Δ-margin probe rounds run on the schedule (quality.probes.interval_s), by outcome (ok, failed: "
               "logged and retried next round).",
               ("outcome",)),
    MetricSpec("steadyrank_probe_margin_floor", "gauge",
               "The configured alert floor of the base probe margin (quality.probes.floor_name / floor_topic).",
               ("probe",)),
    MetricSpec("steadyrank_canary_delta", "gauge",
               "Canary minus primary on a golden metric: paired bootstrap 95% CI (bound: low, point, high).",
               ("metric", "k", "bound")),
    MetricSpec("steadyrank_canary_verdict", "gauge",
               "1 for the current canary verdict (promote, hold, rollback), 0 for the others.",
               ("verdict",)),
    # --- scaling ------------------------------------------------------------------------------
    MetricSpec("steadyrank_partial_searches_total", "counter",
               "Searches of a sharded index answered without every shard (index.partial_results: true).",
               ()),
    MetricSpec("steadyrank_deployment_replicas", "gauge",
               "Replicas of each Ray Serve deployment of the application by state (RUNNING, STARTING, "
               "STOPPING, …), read from Serve's status when /metrics is scraped.",
               ("deployment", "state")),
    # --- live judged samples (quality.live_judging) ----------------------------------------------
    MetricSpec("steadyrank_live_judged_samples_total", "counter",
               "Served rankings offered to live judging, by outcome: judged, failed (the judge failed; stored), "
               "unsampled (over the sampling rate), capped (the daily cost cap had no room), dropped (the judge "
               "queue was full), no_text (a search without return_documents: nothing to judge).",
               ("outcome",)),
    MetricSpec("steadyrank_live_judged_quality", "gauge",
               "Live quality of the served top `depth` against its judged grades: mean over the last "
               "quality.live_judging.window judged samples (bound: point) and its percentile bootstrap "
               "interval (bound: low, high), per variant.",
               ("variant", "metric", "k", "bound")),
    MetricSpec("steadyrank_live_judged_quality_floor", "gauge",
               "The configured alert floor of a live judged measure (quality.live_judging.floors).",
               ("metric", "k")),
    MetricSpec("steadyrank_live_judged_window_samples", "gauge",
               "Judged samples behind the live estimate, per variant.",
               ("variant",)),
    MetricSpec("steadyrank_live_judged_judge_calls_total", "counter",
               "Judge requests made by live judging (retries included).",
               ()),
    MetricSpec("steadyrank_live_judged_tokens_total", "counter",
               "Judge prompt + completion tokens spent by live judging, as the judge reports them.",
               ()),
    MetricSpec("steadyrank_live_judged_budget_used_ratio", "gauge",
               "Share of today's (UTC) live judging cost cap used, by unit (calls, tokens).",
               ("unit",)),
    MetricSpec("steadyrank_live_judged_queue_depth", "gauge",
               "Admitted samples waiting for the live judge.",
               ()),
    # --- golden drift (docs/guides/quality.md "Golden drift"; serve.server.quality.drift) --------------
    MetricSpec("steadyrank_golden_drift_distance", "gauge",
               "Cosine distance of the sampled live queries to their nearest golden query, over the drift "
               "window (stat: mean, p50, p95).",
               ("stat",)),
    MetricSpec("steadyrank_golden_drift_beyond_ratio", "gauge",
               "Share of the drift window's sampled live queries farther from the golden set than the golden "
               "spread (about 1 - quality.drift.spread_quantile while the golden set looks like the traffic).",
               ()),
    MetricSpec("steadyrank_golden_drift_spread", "gauge",
               "The golden spread: the quality.drift.spread_quantile quantile of each golden query's cosine "
               "distance to its nearest other golden query.",
               ()),
    MetricSpec("steadyrank_golden_drift_topic_share", "gauge",
               "Share of a topic (k-means cluster of the golden queries, or uncovered) among the sampled live "
               "queries (source=live) and among the golden queries (source=golden).",
               ("topic", "source")),
    MetricSpec("steadyrank_golden_drift_topic_distance", "gauge",
               "Total-variation distance between the live and the golden topic shares (uncovered included), 0-1.",
               ()),
    MetricSpec("steadyrank_golden_drift_window_queries", "gauge",
               "Sampled live queries in the drift window.",
               ()),
    MetricSpec("steadyrank_golden_drift_samples_total", "counter",
               "Live queries sampled for golden drift by outcome (embedded; dropped: the pending queue was "
               "full; failed: the shadow embedding failed).",
               ("outcome",)),
    # --- per-segment verdicts and guards (docs/guides/quality.md "Per-segment verdicts and guards") -------
    MetricSpec("steadyrank_segment_requests_total", "counter",
               "User /v1/search requests by segment (the quality.segments.header value; untracked names beyond "
               "quality.segments.max_segments count as `other`) and route: what served them (primary, canary, "
               "first_stage: the reranker bypassed).",
               ("segment", "route")),
    MetricSpec("steadyrank_segment_canary_verdict", "gauge",
               "1 for a segment's current canary verdict (promote, hold, rollback; multiple-testing controlled "
               "across segments), 0 for the others.",
               ("segment", "verdict")),
    MetricSpec("steadyrank_segment_pvalue", "gauge",
               "Adjusted p-value (quality.segments.correction) of a segment's sign-flip test on its golden replays: "
               "arm canary (canary vs primary) or reranker (reranked vs first-stage order); test loss or noninferior.",
               ("segment", "arm", "test", "metric", "k")),
    MetricSpec("steadyrank_segment_paired_queries", "gauge",
               "Golden queries of a segment replayed through both arms of a comparison (arm: canary, reranker).",
               ("segment", "arm")),
    MetricSpec("steadyrank_segment_guard_active", "gauge",
               "1 while a guard acts on a segment: harm (its traffic goes to the primary, the canary loses there) or "
               "rerank (its traffic skips the reranker, which loses to the first stage there).",
               ("segment", "guard")),
    MetricSpec("steadyrank_segment_guard_changes_total", "counter",
               "Times a segment's guard turned on or off (guard: harm, rerank; state: on, off); each is logged.",
               ("segment", "guard", "state")),
    # --- certified cutoffs (issue 41) ---------------------------------------------------------
    MetricSpec("steadyrank_cutoff_checks_total", "counter",
               "User rankings whose top_n cutoff certified cutoffs checked (model setting certify_cutoffs).",
               ()),
    MetricSpec("steadyrank_cutoff_uncertified_total", "counter",
               "User rankings whose top_n set was left uncertified (the block of candidates within twice the score "
               "error bound of the cutoff exceeded certify_max_rescore).",
               ()),
    MetricSpec("steadyrank_cutoff_rescored_total", "counter",
               "Candidates near (not exactly tied at) the top_n cutoff re-scored with an FP32 forward pass to "
               "certify it.",
               ()),
)

_OPS: dict[str, tuple[Kind, ...]] = {"inc": ("counter", "gauge"), "observe": ("histogram",), "set": ("gauge",)}


def check_call(op: str, name: str, labels: dict[str, Any]) -> tuple[str, ...]:
    """Validate one recording call against the catalogue; returns the label values in catalogue order."""
    spec = CATALOGUE.get(name)
    if spec is None:
        close = difflib.get_close_matches(name, CATALOGUE, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise TelemetryError(f"unknown metric {name!r}{hint}")
    if spec.kind not in _OPS[op]:
        raise TelemetryError(f"{name} is a {spec.kind}: {op}() is not allowed on it")
    if set(labels) != set(spec.labels):
        raise TelemetryError(
            f"{name} takes labels {sorted(spec.labels)}, got {sorted(labels)}"
        )
    return tuple(str(labels[label]) for label in spec.labels)


# ---------------------------------------------------------------------------------------------
# The registry side (the MetricsHub replica)


class MetricsStore:
    """A prometheus-client registry with every catalogue metric; applies batches of updates."""

    def __init__(self, catalogue: dict[str, MetricSpec] = CATALOGUE) -> None:
        import prometheus_client
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        prometheus_client.disable_created_metrics()  # no *_created series: this process only exports ours
        self.registry = CollectorRegistry(auto_describe=True)
        self._metrics: dict[str, Any] = {}
        self._lock = threading.Lock()
        for spec in catalogue.values():
            if spec.kind == "counter":
                metric = Counter(spec.name, spec.help, spec.labels, registry=self.registry)
            elif spec.kind == "gauge":
                metric = Gauge(spec.name, spec.help, spec.labels, registry=self.registry)
            else:
                assert spec.buckets is not None  # _catalogue: histograms, and only histograms, have buckets
                metric = Histogram(spec.name, spec.help, spec.labels, buckets=spec.buckets, registry=self.registry)
            self._metrics[spec.name] = metric
        self.batches = 0
        self.rejected = 0

    def _child(self, name: str, values: tuple[str, ...]) -> Any:
        metric = self._metrics[name]
        return metric.labels(*values) if values else metric

    def apply(self, updates: Iterable[tuple]) -> int:
        """Apply ``(op, name, label_values, payload)`` updates; returns how many were applied.

        ``inc``/``set`` carry a number, ``observe`` a list of observations. Malformed updates are
        counted in ``rejected`` and skipped (a buggy replica must not break the hub).
        """
        applied = 0
        with self._lock:
            self.batches += 1
            for update in updates:
                try:
                    op, name, values, payload = update
                    spec = CATALOGUE[name]
                    if len(values) != len(spec.labels) or spec.kind not in _OPS[op]:
                        raise TelemetryError(f"bad update {update!r}")
                    child = self._child(name, tuple(values))
                    if op == "inc":
                        child.inc(payload)
                    elif op == "set":
                        child.set(payload)
                    else:
                        for value in payload:
                            child.observe(value)
                    applied += 1
                except Exception:  # noqa: BLE001 - skip one bad update, keep the rest
                    self.rejected += 1
                    logger.warning("metrics hub: rejected update %r", update, exc_info=True)
        return applied

    def render(self) -> bytes:
        """The Prometheus text exposition of the registry."""
        from prometheus_client import generate_latest

        with self._lock:
            return generate_latest(self.registry)


# ---------------------------------------------------------------------------------------------
# The recording side (every replica)


class Recorder:
    """Records metric updates locally and flushes them to the metrics hub in the background.

    ``hub``: a ``DeploymentHandle`` to the MetricsHub (anything with ``record.remote(updates)``),
    or a :class:`MetricsStore` (in-process, e.g. tests and the benchmark), or None (validate and
    drop). Counters are summed and gauges keep their last value between flushes; histogram
    observations are kept individually (bounded by ``max_observations`` per series, beyond which
    they are dropped and counted in ``dropped``).
    """

    def __init__(self, hub: Any = None, *, flush_interval_s: float = 0.5, max_observations: int = 10_000) -> None:
        self.hub = hub
        self.flush_interval_s = float(flush_interval_s)
        self.max_observations = max_observations
        self.dropped = 0
        self.flushes = 0
        self.failures = 0
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, tuple[str, ...]], float] = {}
        self._gauges: dict[tuple[str, tuple[str, ...]], float] = {}
        self._observations: dict[tuple[str, tuple[str, ...]], list[float]] = {}
        self._gauge_incs: dict[tuple[str, tuple[str, ...]], float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()
        _RECORDERS.add(self)

    # -- recording (cheap, thread-safe, validated) --------------------------------------------

    def inc(self, name: str, value: float = 1.0, **labels: Any) -> None:
        """Add ``value`` (≥ 0 for counters) to a counter or gauge."""
        values = check_call("inc", name, labels)
        if CATALOGUE[name].kind == "counter" and value < 0:
            raise TelemetryError(f"{name}: a counter only goes up (got {value})")
        target = self._counts if CATALOGUE[name].kind == "counter" else self._gauge_incs
        with self._lock:
            key = (name, values)
            target[key] = target.get(key, 0.0) + float(value)
        self._ensure_flusher()

    def observe(self, name: str, value: float, **labels: Any) -> None:
        """Record one observation of a histogram."""
        values = check_call("observe", name, labels)
        with self._lock:
            bucket = self._observations.setdefault((name, values), [])
            if len(bucket) < self.max_observations:
                bucket.append(float(value))
            else:
                self.dropped += 1
        self._ensure_flusher()

    def set(self, name: str, value: float, **labels: Any) -> None:
        """Set a gauge."""
        values = check_call("set", name, labels)
        with self._lock:
            self._gauges[(name, values)] = float(value)
            self._gauge_incs.pop((name, values), None)
        self._ensure_flusher()

    # -- flushing -----------------------------------------------------------------------------

    def drain(self) -> list[tuple]:
        """Take the buffered updates as ``(op, name, label_values, payload)`` tuples (and clear them)."""
        with self._lock:
            counts, gauges, observations, gauge_incs = self._counts, self._gauges, self._observations, self._gauge_incs
            self._counts, self._gauges, self._observations, self._gauge_incs = {}, {}, {}, {}
        updates: list[tuple] = [("inc", n, v, x) for (n, v), x in counts.items()]
        updates += [("set", n, v, x) for (n, v), x in gauges.items()]
        updates += [("inc", n, v, x) for (n, v), x in gauge_incs.items()]
        updates += [("observe", n, v, xs) for (n, v), xs in observations.items()]
        return updates

    def flush(self, timeout_s: float | None = 10.0) -> int:
        """Send the buffered updates to the hub now (blocking this thread); returns how many were sent.

        Must not be called from an event loop thread when the hub is a DeploymentHandle (it waits
        for the hub's answer); the background thread and tests call it.
        """
        updates = self.drain()
        if not updates or self.hub is None:
            return 0
        try:
            if isinstance(self.hub, MetricsStore):
                self.hub.apply(updates)
            else:
                self.hub.record.remote(updates).result(timeout_s=timeout_s)
            self.flushes += 1
        except Exception as exc:  # noqa: BLE001 - metrics are best effort
            self.failures += 1
            logger.warning("metrics flush of %d updates failed: %s: %s", len(updates), type(exc).__name__, exc)
            return 0
        return len(updates)

    def _ensure_flusher(self) -> None:
        if self._thread is not None or self.hub is None:
            return
        with self._thread_lock:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name="steadyrank-metrics-flush", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.flush_interval_s):
            self.flush()
        self.flush()

    def close(self) -> None:
        """Flush what is buffered and stop the background thread (idempotent)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self.flush_interval_s + 10.0)
        elif thread is None:
            self.flush()


_RECORDERS: weakref.WeakSet[Recorder] = weakref.WeakSet()


@atexit.register
def _close_recorders() -> None:  # pragma: no cover - process exit
    for recorder in list(_RECORDERS):
        try:
            recorder.close()
        except Exception:  # noqa: BLE001
            pass

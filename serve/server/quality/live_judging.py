"""Live judged samples: sampled served rankings graded by the judge of ``golden build``, off the request path.

The ingress hands the shadow evaluator a *sample* of a served answer after replying (``/v1/search``
inside its mirror event, ``/v1/rerank`` on its own): ``route``, ``query``, ``request_id``,
``served`` (the top ``depth`` results in served order: ``id``, ``score``, ``text``) and, for a
search, ``request`` (the :class:`~serve.server.calls.SearchCall` as a mapping). :meth:`LiveJudging.offer`
decides at once and never waits: a token bucket admits ``rate_per_minute`` samples a minute (at most
``burst`` at once), the daily cost cap must leave room for the sample's passages
(:class:`~serve.settings.quality.LiveJudgingSettings`), and the bounded queue must have a free slot;
a sample refused by any of them is counted (``steadyrank_live_judged_samples_total{outcome}``) and
dropped. One worker judges the queued samples one at a time, in a thread (the judge's calls block),
so neither the request nor the evaluator's event loop waits for the judge.

Per sample, with a canary configured and a search sample, the canary ranks a shadow copy of the
request too; the judge grades the union of both top ``depth`` lists (one pool, so both variants are
measured against the same grades). Each variant's served top ``depth`` is evaluated on ``measures``
(tie-aware expected values, :func:`~.monitor.evaluate_ranking`; the rubric becomes relevance
``max(0, grade − 2)`` as for golden sets), and the estimate of a measure is the mean over the last
``window`` judged samples of the variant with a percentile bootstrap interval
(:func:`steadyrank.metrics.bootstrap_ci`, ``resamples`` resamples, seed 0).

What a sample measures: the pool is what was served, so nDCG@k is the quality of the order within
the judged top ``depth`` (1 = the best order of those documents), ``precision4@k`` the share of the
top k graded 4–5, ``harm@k`` the share graded 1–2. It says nothing of relevant documents the
retriever never found (a golden set does).

The judge arrives as a factory (:data:`JudgeFactory`), built where the app is composed
(:mod:`serve.server.hosting.graph`): the judges live in :mod:`serve.tools.golden.judges`, above
this layer. Every sample, judged or failed, is appended to the store (:mod:`.judgment_store`); on
start the store's records of today restore the cap's count and its latest records per variant
restore the estimate.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from typing import Any, Protocol

import numpy as np

from steadyrank.metrics import bootstrap_ci, parse_measure
from steadyrank.serve.output import json_safe
from steadyrank.serve.server.calls import SearchCall, Variant
from steadyrank.serve.server.quality.golden_sets import GoldenQuery
from steadyrank.serve.server.quality.judgment_store import JudgmentStore, usage_by_day
from steadyrank.serve.server.quality.monitor import evaluate_ranking
from steadyrank.serve.settings.quality import LiveJudgingSettings

logger = logging.getLogger("steadyrank.quality")

#: What became of an offered sample (``steadyrank_live_judged_samples_total{outcome}``).
OUTCOMES = ("judged", "failed", "unsampled", "capped", "dropped", "no_text")
BOUNDS = ("low", "point", "high")


class JudgeCallRecord(Protocol):
    """One judge call as :class:`serve.tools.golden.judges.JudgeCall` records it."""

    answer: dict[str, Any]
    prompt_tokens: int
    completion_tokens: int
    attempts: int

    def to_json(self) -> dict[str, Any]: ...


class GradingJudge(Protocol):
    """The grading side of :class:`serve.tools.golden.judges.Judge`."""

    def grade(self, query: str, passages: Sequence[tuple[str, str]]) -> Iterator[JudgeCallRecord]: ...


JudgeFactory = Callable[[], GradingJudge]
SearchFn = Callable[[SearchCall], Any]  # async: the Searcher's call → its outcome as a mapping


def utc_day(unix_s: float) -> str:
    """The UTC date of ``unix_s`` as ``YYYY-MM-DD`` (the cost cap's day)."""
    return datetime.fromtimestamp(unix_s, tz=timezone.utc).date().isoformat()


def text_id(text: str) -> str:
    """The id of a ``/v1/rerank`` document in the store: ``sha256:`` + the SHA-256 (hex) of its text."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


class TokenBucket:
    """``rate`` tokens per second, at most ``capacity`` held; :meth:`take` never waits."""

    def __init__(self, rate: float, capacity: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.capacity, self.clock = rate, float(capacity), clock
        self.tokens, self.last = float(capacity), clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


class LiveJudging:
    """Sampling, the daily cap, the queue, the judge worker, the per-variant estimates."""

    def __init__(self, settings: LiveJudgingSettings, judge: JudgeFactory, recorder: Any, search: SearchFn,
                 variants: Sequence[Variant] = ("primary",), *, clock: Callable[[], float] = time.time) -> None:
        """Builds the judge (a model load or a client) and restores the store; start :meth:`run_forever`."""
        if settings.store is None:
            raise ValueError("quality.live_judging.store is required")
        self.settings, self.recorder, self.search, self.clock = settings, recorder, search, clock
        self.variants = tuple(variants)
        self.judge = judge()
        self.store = JudgmentStore(settings.store)
        self.bucket = TokenBucket(settings.rate_per_minute / 60.0, settings.burst)
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=settings.queue_size)
        self.windows: dict[str, deque[dict[str, float]]] = {v: deque(maxlen=settings.window) for v in self.variants}
        self.counts: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
        self.reserved = 0  # calls planned by queued samples
        self.day = utc_day(clock())
        records = self.store.open()
        self.used = usage_by_day(records).get(self.day, (0, 0))
        for record in records:
            if record.get("status") == "judged":
                for variant, values in record.get("values", {}).items():
                    if variant in self.windows:
                        self.windows[variant].append(values)
        self.restored = len(records)
        for name, floor in settings.floors.items():
            measure = parse_measure(name)
            recorder.set("steadyrank_live_judged_quality_floor", floor, metric=measure.name, k=str(measure.k))
        self.export()

    # --- admission (on the event loop, never waits) -------------------------------------------
    def _count(self, outcome: str) -> None:
        self.counts[outcome] += 1
        self.recorder.inc("steadyrank_live_judged_samples_total", outcome=outcome)

    def _roll_day(self) -> None:
        today = utc_day(self.clock())
        if today != self.day:
            self.day, self.used = today, (0, 0)

    def _room(self, planned: int) -> bool:
        """Whether today's cap has room for ``planned`` more calls (see the settings' docstring)."""
        self._roll_day()
        calls, tokens = self.used
        return (calls + self.reserved + planned <= self.settings.max_calls_per_day
                and tokens < self.settings.max_tokens_per_day)

    def offer(self, sample: dict[str, Any]) -> str | None:
        """Admit ``sample`` to the judge queue or count why not; returns the refusal's outcome (None = queued)."""
        served = [s for s in sample.get("served", [])[: self.settings.depth] if s.get("text") is not None]
        if not served:
            outcome = "no_text"
        elif not self.bucket.take():
            outcome = "unsampled"
        elif not self._room(len(served)):
            outcome = "capped"
        elif self.queue.full():
            outcome = "dropped"
        else:
            self.reserved += len(served)
            self.queue.put_nowait({**sample, "served": served, "planned": len(served), "offered_s": self.clock()})
            self.recorder.set("steadyrank_live_judged_queue_depth", float(self.queue.qsize()))
            return None
        self._count(outcome)
        return outcome

    # --- the worker --------------------------------------------------------------------------
    async def run_forever(self) -> None:
        """Judge queued samples one at a time, until cancelled; no failure stops the loop."""
        while True:
            sample = await self.queue.get()
            self.recorder.set("steadyrank_live_judged_queue_depth", float(self.queue.qsize()))
            try:
                await self.judge_sample(sample)
            except Exception:  # noqa: BLE001 - the loop must survive anything
                logger.exception("live judging of request %s failed", sample.get("request_id"))
            finally:
                self.queue.task_done()

    def _ids(self, sample: dict[str, Any]) -> list[tuple[str, float, str]]:
        """(id, score, text) of the served top ``depth``: index ids (search) or text ids (rerank)."""
        by_text = sample["route"] == "rerank"
        return [(text_id(s["text"]) if by_text else str(s["id"]), float(s["score"]), str(s["text"]))
                for s in sample["served"]]

    async def _canary(self, sample: dict[str, Any]) -> list[tuple[str, float, str]] | None:
        """The canary's top ``depth`` for a search sample (a shadow copy), when one is configured."""
        if "canary" not in self.variants or sample["route"] != "search":
            return None
        request = sample.get("request") or {}
        call = SearchCall(query=sample["query"], top_n=self.settings.depth, mode=request.get("mode"),
                          denoise=request.get("denoise"), return_documents=True, shadow=True, variant="canary")
        try:
            results = (await self.search(call))["results"]
        except Exception as exc:  # noqa: BLE001 - the primary is still judged
            logger.warning("live judging: canary copy failed: %s: %s", type(exc).__name__, exc)
            return None
        return [(str(r["id"]), float(r["relevance_score"]), str(r["text"])) for r in results if r.get("text") is not None]

    async def judge_sample(self, sample: dict[str, Any]) -> dict[str, Any]:
        """Judge one admitted sample, store and count it, refresh the estimate; returns its record."""
        self.reserved -= sample["planned"]
        rankings = {"primary": self._ids(sample)}
        canary = await self._canary(sample)
        if canary is not None:
            extra = len({d for d, _, _ in canary} - {d for d, _, _ in rankings["primary"]})
            if self._room(sample["planned"] + extra):  # the primary's passages are not charged yet
                rankings["canary"] = canary
        passages = list({d: (d, text) for ranking in rankings.values() for d, _, text in ranking}.values())
        day = utc_day(self.clock())
        record: dict[str, Any] = {
            "day": day, "timestamp": self.clock(), "route": sample["route"], "request_id": sample.get("request_id"),
            "query": sample["query"], "served": {v: [d for d, _, _ in r] for v, r in rankings.items()},
        }
        try:
            calls = await asyncio.to_thread(lambda: list(self.judge.grade(sample["query"], passages)))
        except Exception as exc:  # noqa: BLE001 - a judge failure is counted, stored and logged
            record.update(status="failed", error=f"{type(exc).__name__}: {exc}"[:500], judge_calls=len(passages), tokens=0)
            self._charge(day, len(passages), 0)
            self.store.append(record)
            self._count("failed")
            logger.warning("live judging of request %s failed: %s", sample.get("request_id"), record["error"])
            return record
        grades = {str(d): int(g) for call in calls for d, g in call.answer["grades"].items()}
        used_calls = sum(call.attempts for call in calls)
        tokens = sum(call.prompt_tokens + call.completion_tokens for call in calls)
        golden = GoldenQuery(str(sample.get("request_id") or "live"), sample["query"], grades)
        values = {}
        for variant, ranking in rankings.items():
            evaluation = evaluate_ranking(golden, [(d, s) for d, s, _ in ranking], variant=variant, source="live",
                                          measures=self.settings.measures)
            values[variant] = {name: evaluation.stats[name]["expected"] for name in self.settings.measures}
            self.windows[variant].append(values[variant])
        record.update(status="judged", grades=grades, values=json_safe(values), judge_calls=used_calls,
                      tokens=tokens, calls=[call.to_json() for call in calls])
        self._charge(day, used_calls, tokens)
        self.store.append(record)
        self._count("judged")
        self.export()
        return record

    def _charge(self, day: str, calls: int, tokens: int) -> None:
        self._roll_day()
        if day == self.day:
            self.used = (self.used[0] + calls, self.used[1] + tokens)
        self.recorder.inc("steadyrank_live_judged_judge_calls_total", float(calls))
        self.recorder.inc("steadyrank_live_judged_tokens_total", float(tokens))
        self.recorder.set("steadyrank_live_judged_budget_used_ratio", self.used[0] / self.settings.max_calls_per_day,
                          unit="calls")
        self.recorder.set("steadyrank_live_judged_budget_used_ratio", self.used[1] / self.settings.max_tokens_per_day,
                          unit="tokens")

    # --- estimates, exports, status ------------------------------------------------------------
    def estimates(self) -> dict[str, dict[str, dict[str, float | int]]]:
        """Variant → measure → ``point``, ``low``, ``high`` (the bootstrap interval) and ``n`` (defined samples)."""
        out: dict[str, dict[str, dict[str, float | int]]] = {}
        for variant, window in self.windows.items():
            out[variant] = {}
            for name in self.settings.measures:
                values = np.array([v.get(name, np.nan) for v in window], dtype=np.float64)
                ci = bootstrap_ci(values, n_resamples=self.settings.resamples,
                                  confidence=self.settings.confidence, seed=0)
                out[variant][name] = {"point": ci.estimate, "low": ci.low, "high": ci.high, "n": ci.n}
        return out

    def export(self) -> None:
        """Set the estimate gauges (bound: low, point, high) and the window sizes; NA values are left unset."""
        for variant, measures in self.estimates().items():
            self.recorder.set("steadyrank_live_judged_window_samples", float(len(self.windows[variant])), variant=variant)
            for name, estimate in measures.items():
                measure = parse_measure(name)
                for bound in BOUNDS:
                    value = float(estimate[bound])
                    if not np.isnan(value):
                        self.recorder.set("steadyrank_live_judged_quality", value, variant=variant,
                                          metric=measure.name, k=str(measure.k), bound=bound)

    def status(self) -> dict[str, Any]:
        """The ``live_judging`` section of ``GET /v1/quality``."""
        self._roll_day()
        s = self.settings
        return {
            "enabled": True, "samples": dict(self.counts), "queued": self.queue.qsize(), "restored_records": self.restored,
            "day": self.day, "judge_calls_today": self.used[0], "tokens_today": self.used[1],
            "max_calls_per_day": s.max_calls_per_day, "max_tokens_per_day": s.max_tokens_per_day,
            "rate_per_minute": s.rate_per_minute, "depth": s.depth, "interval": "percentile bootstrap",
            "confidence": s.confidence, "floors": s.floors, "estimates": json_safe(self.estimates()),
        }


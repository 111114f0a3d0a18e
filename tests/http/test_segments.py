"""Issue 41, per-segment verdicts and guards, in process: the real ``create_app`` and the real
shadow evaluator (``ShadowEvaluator`` around ``QualityService``, its replay loop idle), around a
stand-in Searcher (it stands for the retrieval and reranker replicas, which need model weights and
Ray; conftest.py).

The stand-in ranks four judged documents of each golden query in their best order, except the
canary on segment ``de`` (the worst order) and the first stage on segment ``code`` (the best, where
the reranker gives the worst): a canary that loses on one segment only, and a reranker that loses
to its first stage on one segment only.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from steadyrank.serve.server.calls import SearchCall, SearchOutcome
from steadyrank.serve.server.hosting.colocated import LocalHandle
from steadyrank.serve.server.quality.evaluator import ShadowEvaluator
from steadyrank.serve.server.quality.service import GoldenProfile
from tests.http.conftest import RERANKER_ID, Served, build, metric

pytestmark = pytest.mark.anyio

SEGMENTS = ("de", "en", "fr", "code")
PER_SEGMENT = 12
BEST = ["d1", "d2", "d3", "d4"]
JUDGMENTS = {"d1": 5, "d2": 4, "d3": 2, "d4": 1}


class SegmentSearcher:
    """Serves ``BEST`` or its reverse by variant, first stage and the query's segment (its first word)."""

    def __init__(self) -> None:
        self.calls: list[SearchCall] = []

    async def ready(self) -> dict[str, Any]:
        return {}

    async def search(self, call: Any) -> SearchOutcome:
        call = SearchCall.model_validate(call)
        self.calls.append(call)
        segment = call.query.split()[0]
        if not call.rerank:
            worst = segment != "code"
        else:
            worst = (call.variant == "canary" and segment == "de") or segment == "code"
        order = BEST[::-1] if worst else BEST
        candidates = [{"id": d, "relevance_score": float(4 - i), "rank_key": float(4 - i)} for i, d in enumerate(order)]
        meta = {"k": 0 if not call.rerank else 4, "escalated": False, "reasons": [], "signals": {}, "stages_ms": {},
                "retrieval_ms": {}, "mode": "hybrid", "retrieved": 4, "tie_groups": [], "tie_at_cutoff": False,
                "tie_group_size_at_cutoff": 0, "rescored_ties": 0, "model": RERANKER_ID, "precision": "fp32",
                "scoring": "hps", "variant": call.variant, "shadow": call.shadow, "reranked": call.rerank}
        results = [{"id": c["id"], "relevance_score": c["relevance_score"]} for c in candidates[:2]]
        return SearchOutcome.model_validate({"results": results, "candidates": candidates, "meta": meta})


def _golden(tmp_path: Path) -> Path:
    path = tmp_path / "golden.jsonl"
    lines = [{"query_id": f"{s}-{i}", "query": f"{s} question {i}", "judgments": JUDGMENTS, "segment": s}
             for s in SEGMENTS for i in range(PER_SEGMENT)]
    path.write_text("".join(json.dumps(q) + "\n" for q in lines), encoding="utf-8")
    return path


async def _served(tmp_path: Path, **segments: Any) -> tuple[Served, ShadowEvaluator, SegmentSearcher]:
    served = build({"canary": {"path": "stand-in-canary"},
                    "quality": {"golden": str(_golden(tmp_path)), "interval_s": 3600, "canary_fraction": 0.0,
                                "sample_size": len(SEGMENTS) * PER_SEGMENT, "seed": 0,
                                # stand-in latencies are microseconds of noise (the test is about quality);
                                # 4096 = 2^12 resamples: the sign-flip tests of 12 pairs are exact
                                "canary": {"min_queries": 2, "max_p95_latency_increase": 1e6, "resamples": 4096},
                                "segments": {"canary_share": 1.0, "refresh_s": 0, **segments}}})
    searcher = SegmentSearcher()
    served.services.searcher = LocalHandle(searcher)
    settings = served.services.settings
    evaluator = ShadowEvaluator(settings.quality, LocalHandle(searcher), served.hub.store, ("primary", "canary"),
                                GoldenProfile(settings.search.default_mode, settings.search.denoise))
    served.services.evaluator = LocalHandle(evaluator)
    return served, evaluator, searcher


async def _meta(client: Any, segment: str | None) -> dict[str, Any]:
    headers = {} if segment is None else {"X-Steadyrank-Segment": segment}
    response = await client.post("/v1/search", json={"query": "anything at all"}, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["meta"]


async def _routed(client: Any, segment: str, want: dict[str, Any]) -> dict[str, Any]:
    """The meta of a search of ``segment`` once the edge's detached route refresh shows ``want`` (a cap)."""
    for _ in range(2000):
        meta = await _meta(client, segment)
        if all(meta[k] == v for k, v in want.items()):
            return meta
        await asyncio.sleep(0.005)
    raise AssertionError(f"segment {segment} never routed as {want}: {meta}")


async def test_a_canary_that_loses_on_one_segment_is_refused_there_and_promoted_elsewhere(tmp_path) -> None:
    served, evaluator, _ = await _served(tmp_path, harm_guard=True)
    try:
        async with served.client() as c:
            # before any verdict every segment gets the canary (canary_share 1.0)
            assert (await _meta(c, "de"))["variant"] == "canary"
            assert await evaluator.replay_now() == 2 * len(SEGMENTS) * PER_SEGMENT
            quality = (await c.get("/v1/quality")).json()
            assert (await _routed(c, "de", {"variant": "primary"}))["reranked"] is True
            for segment in ("en", "fr", None):
                assert (await _meta(c, segment))["variant"] == "canary"
    finally:
        evaluator._replays.cancel()
        evaluator.service.recorder.flush()  # the evaluator's gauges, flushed every 0.5 s in the background
    verdicts = quality["segments"]["verdicts"]["canary"]
    assert verdicts["correction"] == "holm" and verdicts["alpha"] == pytest.approx(0.05)
    by_segment = {s: r["verdict"] for s, r in verdicts["segments"].items()}
    # code: the canary equals the primary there (both give the worst order): non-inferior, promoted
    assert by_segment == {"de": "rollback", "en": "promote", "fr": "promote", "code": "promote"}
    de = verdicts["segments"]["de"]["metrics"]["ndcg@10"]
    # 12 pairs all worse: exact sign-flip p = 2^-12, Holm over 4 segments x 2 measures multiplies by 8
    assert de["p_loss"] == pytest.approx(2.0 ** -12)
    assert de["p_loss_adjusted"] == pytest.approx(8 * 2.0 ** -12)
    assert quality["segments"]["routes"] == {"refused": ["de"], "bypassed": []}
    assert metric(served, "steadyrank_segment_guard_active", segment="de", guard="harm") == 1.0
    assert metric(served, "steadyrank_segment_guard_active", segment="en", guard="harm") == 0.0
    assert metric(served, "steadyrank_segment_canary_verdict", segment="de", verdict="rollback") == 1.0
    assert metric(served, "steadyrank_segment_canary_verdict", segment="en", verdict="promote") == 1.0
    assert metric(served, "steadyrank_segment_guard_changes_total", segment="de", guard="harm", state="on") == 1.0
    assert metric(served, "steadyrank_segment_requests_total", segment="de", route="primary") >= 1
    assert metric(served, "steadyrank_segment_requests_total", segment="en", route="canary") == 1.0


async def test_without_the_harm_guard_the_losing_segment_keeps_the_canary(tmp_path) -> None:
    served, evaluator, searcher = await _served(tmp_path)
    try:
        async with served.client() as c:
            await evaluator.replay_now()
            verdicts = (await c.get("/v1/quality")).json()["segments"]["verdicts"]["canary"]["segments"]
            assert verdicts["de"]["verdict"] == "rollback"
            assert (await _meta(c, "de"))["variant"] == "canary"
    finally:
        evaluator._replays.cancel()
        evaluator.service.recorder.flush()  # the evaluator's gauges, flushed every 0.5 s in the background
    assert (await evaluator.segment_routes())["refused"] == []


async def test_the_reranker_is_bypassed_where_it_loses_to_the_first_stage(tmp_path) -> None:
    served, evaluator, searcher = await _served(tmp_path, rerank_guard=True, canary_share=0.0)
    try:
        async with served.client() as c:
            await evaluator.replay_now()
            meta = await _routed(c, "code", {"reranked": False})
            assert meta["variant"] == "primary"
            assert (await _meta(c, "en"))["reranked"] is True
            quality = (await c.get("/v1/quality")).json()
    finally:
        evaluator._replays.cancel()
        evaluator.service.recorder.flush()  # the evaluator's gauges, flushed every 0.5 s in the background
    reranker = quality["segments"]["verdicts"]["reranker"]["segments"]
    assert {s: r["loses"] for s, r in reranker.items()} == {"code": True, "de": False, "en": False, "fr": False}
    assert quality["segments"]["routes"]["bypassed"] == ["code"]
    # the first stage was replayed without the reranker, as shadow traffic
    assert any(not call.rerank and call.shadow for call in searcher.calls)
    assert metric(served, "steadyrank_segment_requests_total", segment="code", route="first_stage") >= 1
    assert metric(served, "steadyrank_segment_guard_active", segment="code", guard="rerank") == 1.0


@pytest.mark.parametrize("value", ["x" * 33, "x" * 16384, "bad value", "-lead", "é"])
async def test_a_malformed_segment_is_refused_before_any_work(tmp_path, value: str) -> None:
    """The length is checked before the pattern; a 16 KiB value is refused like a 33-character one."""
    served, evaluator, searcher = await _served(tmp_path)
    try:
        async with served.client() as c:
            response = await c.post("/v1/search", json={"query": "q"},
                                    headers={"X-Steadyrank-Segment": value.encode("utf-8")})
    finally:
        evaluator._replays.cancel()
        evaluator.service.recorder.flush()  # the evaluator's gauges, flushed every 0.5 s in the background
    assert response.status_code == 400
    assert "X-Steadyrank-Segment" in response.json()["error"]["message"]
    assert searcher.calls == []


async def test_distinct_segments_beyond_the_bound_count_as_other(tmp_path) -> None:
    served, evaluator, _ = await _served(tmp_path, max_segments=3)
    try:
        async with served.client() as c:
            for i in range(50):
                await _meta(c, f"tenant-{i}")
    finally:
        evaluator._replays.cancel()
        evaluator.service.recorder.flush()  # the evaluator's gauges, flushed every 0.5 s in the background
    assert metric(served, "steadyrank_segment_requests_total", segment="tenant-0", route="canary") == 1.0
    assert metric(served, "steadyrank_segment_requests_total", segment="tenant-1", route="canary") == 1.0
    assert metric(served, "steadyrank_segment_requests_total", segment="tenant-2", route="canary") == 0.0
    assert metric(served, "steadyrank_segment_requests_total", segment="other", route="canary") == 48.0
    assert len(served.services.settings.quality.segments.header) > 0


async def test_the_real_searcher_serves_the_first_stage_order_without_the_reranker() -> None:
    """The real ``Searcher`` (stand-in retriever and reranker of test_tracing.py): ``rerank`` false
    serves the retrieval order and scores, reranks nothing (``k`` 0), and says so in ``meta``."""
    from steadyrank.serve.server.components.searcher import Searcher
    from tests.http.test_tracing import StandInReranker, StandInRetriever

    served = build()  # the embedded default: the reranker scores from the index's stored vectors
    reranker = StandInReranker()
    searcher = Searcher(served.services.settings, served.services.embedder, LocalHandle(StandInRetriever()),
                        LocalHandle(reranker), None, served.hub.store)
    reranked = await searcher.search(SearchCall(query="a question", mode="dense"))
    first = await searcher.search(SearchCall(query="a question", mode="dense", rerank=False))
    assert first.meta.reranked is False and first.meta.k == 0 and first.meta.scoring == "first_stage"
    scores = [c.relevance_score for c in first.candidates]
    assert scores == sorted(scores, reverse=True) and len(first.candidates) == first.meta.retrieved
    assert reranked.meta.reranked is True and reranked.meta.k > 0

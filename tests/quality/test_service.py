"""The shadow evaluator's loop: replays, failures counted and retried, mirroring, canary, exports.

``search`` here is an in-process function standing in for the Searcher deployment (it ranks a
fixed pool by a deterministic score); the real Ray Serve path is exercised in tests/serve. The
recorder keeps what would be sent to the metrics hub.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

from steadyrank.serve.server.quality.golden_sets import GoldenQuery, GoldenSet
from steadyrank.serve.server.quality.service import GoldenProfile, QualityService
from steadyrank.serve.settings.quality import CanaryRules, QualitySettings

GOLDEN = GoldenSet({
    "q1": GoldenQuery("q1", "restart a systemd unit", {"d1": 5, "d2": 3, "d9": 1}),
    "q2": GoldenQuery("q2", "list open ports", {"d3": 5, "d4": 4}),
    "q3": GoldenQuery("q3", "broken query", {"d5": 5}),
})
POOL = [f"d{i}" for i in range(1, 12)]
PROFILE = GoldenProfile("hybrid", "rules")  # the server's defaults the replays run under


class MemoryRecorder:
    def __init__(self):
        self.counters = defaultdict(float)
        self.gauges = {}

    def inc(self, name, value=1.0, **labels):
        self.counters[(name, tuple(sorted(labels.items())))] += value

    def set(self, name, value, **labels):
        self.gauges[(name, tuple(sorted(labels.items())))] = value


async def search(request):
    if request.query == "broken query":
        raise RuntimeError("searcher unavailable")
    assert request.shadow is True
    if request.top_n == 30:  # a replay names the profile's settings
        assert (request.mode, request.denoise) == (PROFILE.mode, PROFILE.denoise)
    bonus = 0.0 if request.variant == "primary" else 0.001
    scored = [{"id": d, "relevance_score": round(1 - i / 20 + bonus, 2)} for i, d in enumerate(POOL)]
    return {"candidates": scored, "meta": {"escalated": request.variant == "canary"}}


def service(**overrides):
    settings = QualitySettings(sample_size=3, interval_s=0.01, seed=1, canary=CanaryRules(min_queries=2, resamples=200),
                               **overrides)
    return QualityService(settings, GOLDEN, search, MemoryRecorder(), variants=("primary", "canary"), profile=PROFILE)


def test_replay_counts_failures_retries_and_exports():
    svc = service()
    evaluated = asyncio.run(svc.replay_round())
    assert evaluated == 4  # q1, q2 through both variants; q3 fails twice
    rec = svc.recorder
    assert rec.counters[("steadyrank_golden_failures_total", (("variant", "primary"),))] == 1
    assert rec.counters[("steadyrank_golden_evaluations_total", (("source", "replay"), ("variant", "canary")))] == 2
    assert "q3" in svc.retry
    key = ("steadyrank_golden_quality", (("k", "10"), ("metric", "ndcg"), ("stat", "expected"), ("variant", "primary")))
    assert 0 < rec.gauges[key] <= 1
    assert ("steadyrank_golden_proc_ratio", (("k", "10"), ("metric", "ra_nwg"), ("variant", "primary"))) in rec.gauges
    assert sum(v for (n, _), v in rec.gauges.items() if n == "steadyrank_canary_verdict") == 1.0
    # window statistics: the stub escalates every canary search, never a primary one; 11 candidates, no ties
    for variant, escalated in (("primary", 0.0), ("canary", 1.0)):
        labels = (("variant", variant),)
        assert rec.gauges[("steadyrank_golden_escalation_ratio", labels)] == escalated
        assert rec.gauges[("steadyrank_golden_candidates_mean", labels)] == len(POOL)
        assert rec.gauges[("steadyrank_golden_ties_at_cutoff_ratio", labels)] == 0.0
        assert ("steadyrank_golden_tie_group_size_mean", labels) not in rec.gauges  # NA: no tie, left unset
        p50 = rec.gauges[("steadyrank_golden_latency_seconds", (("quantile", "0.5"), *labels))]
        assert 0 <= p50 <= rec.gauges[("steadyrank_golden_latency_seconds", (("quantile", "0.95"), *labels))]
    asyncio.run(svc.replay_round())  # the loop goes on; q3 is retried first and fails again
    assert rec.counters[("steadyrank_golden_failures_total", (("variant", "primary"),))] == 2


def test_run_forever_survives_failures():
    """The loop keeps going after failed replays (q3 fails every time): it is left running until it
    has done two rounds (a generous cap, not a timing assertion: a loaded machine is slow)."""
    svc = service()

    async def run_two_rounds():
        task = asyncio.create_task(svc.run_forever())
        cap = asyncio.get_running_loop().time() + 60.0
        while svc.counts["rounds"] < 2 and asyncio.get_running_loop().time() < cap and not task.done():
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(run_two_rounds())
    assert svc.counts["rounds"] >= 2 and svc.counts["failures"] >= 2 and svc.counts["replayed"] >= 8


def test_mirror_matches_header_or_text_and_copies_to_canary():
    svc = service(canary_fraction=1.0)
    served = [{"id": d, "relevance_score": 1 - i / 20} for i, d in enumerate(POOL)]
    asyncio.run(svc.mirror({"query": "Restart a systemd unit!", "candidates": served}))
    asyncio.run(svc.mirror({"query": "anything", "golden_query_id": "q2", "golden_trusted": True,
                            "candidates": served}))
    asyncio.run(svc.mirror({"query": "not golden at all", "candidates": served}))
    assert svc.counts["mirrored"] == 2
    assert [e.query_id for e in svc.window.evaluations("primary")] == ["q1", "q2"]
    assert len(svc.agreements) == 3 and list(svc.agreements.values())[-1].top10_overlap == 1.0


def test_a_golden_query_id_header_is_honoured_only_for_its_own_query_or_an_admin_key():
    """Issue 31, finding 8: any client may send X-Golden-Query-Id; unrelated searches must not be
    scored against that golden query's judgments (~200 of them collapsed the golden quality)."""
    svc = service(canary_fraction=0.0)
    served = [{"id": d, "relevance_score": 1 - i / 20} for i, d in enumerate(POOL)]
    for _ in range(20):
        asyncio.run(svc.mirror({"query": "how do cats purr", "golden_query_id": "q2", "candidates": served}))
    assert svc.counts["mirrored"] == 0 and svc.counts["golden_id_ignored"] == 20
    asyncio.run(svc.mirror({"query": "List open ports", "golden_query_id": "q2", "candidates": served}))
    asyncio.run(svc.mirror({"query": "restart a systemd unit", "golden_query_id": "q2", "candidates": served}))
    asyncio.run(svc.mirror({"query": "how do cats purr", "golden_query_id": "q2", "golden_trusted": True,
                            "candidates": served}))
    # the window holds distinct queries: q2's second evaluation refreshed its entry (now the newest)
    assert [e.query_id for e in svc.window.evaluations("primary")] == ["q1", "q2"]
    assert svc.window.composition("primary")["evaluations"] == 3


def test_canary_report_without_canary():
    svc = QualityService(QualitySettings(), GOLDEN, search, MemoryRecorder(), profile=PROFILE)
    assert svc.canary_report()["verdict"] is None
    status = svc.status()
    assert status["golden_queries"] == 3 and status["variants"] == ["primary"]


GOOD = [{"id": d, "relevance_score": 1 - i / 20} for i, d in enumerate(POOL)]  # d1, d2, … : q1's best first
WORST = list(reversed([{"id": d, "relevance_score": 1 - i / 20} for i, d in enumerate(POOL)]))


def _expected(svc: QualityService, measure: str = "ra_nwg@10") -> float:
    return svc.window.summary("primary").quality[measure]["expected"]


def test_repeating_one_golden_query_moves_the_window_by_that_one_query():
    """Issue 36, item 4: sending one golden query 200 times (served its worst ranking) used to fill
    the 200-evaluation window with it, so /v1/quality, the RA-nWG alert and the canary verdict read
    that one query's score. The window holds distinct queries: the repeats refresh one entry."""
    svc = service(canary_fraction=0.0)
    asyncio.run(svc.replay_round())  # q1, q2 replayed (q3 fails), one entry each
    assert svc.window.composition("primary")["queries"] == 2
    reference = service(canary_fraction=0.0)
    asyncio.run(reference.replay_round())
    asyncio.run(reference.mirror({"query": "restart a systemd unit", "candidates": WORST}))  # q1 served badly once
    once = _expected(reference)
    for _ in range(200):
        asyncio.run(svc.mirror({"query": "Restart a systemd unit", "candidates": WORST}))
    assert svc.counts["mirrored"] == 200
    assert [e.query_id for e in svc.window.evaluations("primary")] == ["q2", "q1"]
    assert _expected(svc) == once  # as if q1 had been served badly once; q2 still weighs half
    assert svc.window.composition("primary") == {
        "queries": 2, "evaluations": 202, "repeats_refreshed": 200, "by_source": {"replay": 1, "mirror": 1},
        "replayed": 2}
    svc.export()
    gauge = ("steadyrank_golden_quality", (("k", "10"), ("metric", "ra_nwg"), ("stat", "expected"),
                                           ("variant", "primary")))
    assert svc.recorder.gauges[gauge] == once
    status = svc.status()
    assert status["windows"]["primary"]["n"] == 2
    assert status["windows"]["primary"]["composition"]["repeats_refreshed"] == 200
    assert status["evaluation_settings"] == {"mode": "hybrid", "denoise": "rules"}


def test_a_mirrored_search_under_another_mode_or_denoiser_is_not_a_golden_evaluation():
    """A request naming another mode or denoise ranks another way than the golden replays measure:
    it is skipped (and counted); naming the defaults explicitly is the same as naming none."""
    svc = service(canary_fraction=0.0)
    for request in ({"mode": "bm25"}, {"denoise": "off"}, {"mode": "dense", "denoise": "llm"}):
        asyncio.run(svc.mirror({"query": "list open ports", "request": {"query": "list open ports", **request},
                                "candidates": WORST}))
    assert svc.counts["mirrored"] == 0 and svc.counts["mirror_skipped_settings"] == 3
    assert svc.window.evaluations("primary") == []
    for request in ({}, {"mode": "hybrid", "denoise": "rules"}, {"mode": None, "denoise": None, "top_n": 5}):
        asyncio.run(svc.mirror({"query": "list open ports", "request": {"query": "list open ports", **request},
                                "candidates": GOOD}))
    assert svc.counts["mirrored"] == 3 and svc.window.composition("primary")["queries"] == 1


def test_the_canary_pairs_on_replays_and_repeated_mirrors_do_not_outweigh_them():
    """The canary verdict pairs each golden query's latest replay: 200 mirrored searches of one query
    (each copied to the canary) neither add pairs nor remove the replayed ones, and the agreement
    keeps one entry per distinct query."""
    svc = service(canary_fraction=1.0)
    asyncio.run(svc.replay_round())
    before = svc.canary_report()
    calls = []

    async def counting(request):
        calls.append(request)
        return await search(request)

    svc.search = counting
    for _ in range(200):
        asyncio.run(svc.mirror({"query": "restart a systemd unit", "request": {"top_n": 7, "mode": "hybrid"},
                                "candidates": WORST}))
    after = svc.canary_report()
    assert after["paired_queries"] == before["paired_queries"] == 2
    assert after["metrics"]["ndcg@10"]["delta"] == before["metrics"]["ndcg@10"]["delta"]
    assert after["agreement"]["n"] == 1 and len(svc.agreements) == 1
    # the canary copy repeats the request's own settings
    assert {(c.top_n, c.mode, c.denoise, c.variant) for c in calls} == {(7, "hybrid", None, "canary")}
    assert svc.window.composition("canary")["by_source"] == {"replay": 1, "mirror": 1}

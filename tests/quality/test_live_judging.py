"""Live judged samples (issue 41): sampling, the daily cost cap, the bounded queue, the store, the estimate.

No LLM runs on the test machines: the judge is the stand-in chat model of the ``golden build`` tests
(``tests/golden/llm_standin.py``, an OpenAI-compatible server on 127.0.0.1 with deterministic
answers), reached through the real ``openai-chat`` judge (the real ``openai`` client) that
``quality.live_judging.judge`` configures, built by the composition root's own factory
(``serve.server.hosting.graph.live_judge``). The Searcher is not needed (no canary here).
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from steadyrank.serve.server.hosting.graph import live_judge
from steadyrank.serve.server.quality.golden_sets import GoldenQuery
from steadyrank.serve.server.quality.judgment_store import JudgmentStore, StoreDamagedError, read_records
from steadyrank.serve.server.quality.live_judging import LiveJudging, TokenBucket
from steadyrank.serve.server.quality.monitor import evaluate_ranking
from steadyrank.serve.settings.quality import LiveJudgingSettings
from steadyrank.serve.telemetry import check_call
from tests.golden.llm_standin import StandinLLM, judge_config

pytestmark = pytest.mark.anyio

#: Passages the stand-in grades 5 (all query words), 3 (some) and 1 (none) for QUERY.
QUERY = "restart a crashed systemd service"
PASSAGES = {"good": "Restart a crashed systemd service with Restart=on-failure.",
            "some": "The systemd service manager starts daemons.",
            "off": "Bake bread at 220 degrees."}


class Recording:
    """A recorder that checks every call against the metric catalogue and keeps the last values."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}

    def inc(self, name: str, value: float = 1.0, **labels: str) -> None:
        check_call("inc", name, labels)
        key = (name, tuple(sorted(labels.items())))
        self.values[key] = self.values.get(key, 0.0) + value

    def set(self, name: str, value: float, **labels: str) -> None:
        check_call("set", name, labels)
        self.values[(name, tuple(sorted(labels.items())))] = value

    def get(self, name: str, **labels: str) -> float | None:
        return self.values.get((name, tuple(sorted(labels.items()))))


def sample(order: list[str], request_id: str = "r1") -> dict[str, Any]:
    """A served search of QUERY whose top results are ``order`` (keys of PASSAGES), best score first."""
    return {"route": "search", "query": QUERY, "request_id": request_id,
            "served": [{"id": d, "score": 1.0 - i / 10, "text": PASSAGES[d]} for i, d in enumerate(order)]}


def live(tmp_path: Path, llm: StandinLLM, recorder: Any = None, *, clock: Any = None, **overrides: Any) -> LiveJudging:
    settings = LiveJudgingSettings(enabled=True, store=str(tmp_path / "judged.jsonl"),
                                   **{"rate_per_minute": 6000.0, "burst": 100, **overrides})
    judge = functools.partial(live_judge, str(judge_config(tmp_path / "judge.json", llm.base_url)))
    options = {} if clock is None else {"clock": clock}
    return LiveJudging(settings, judge, recorder or Recording(), search=None, variants=("primary",), **options)


async def judged(service: LiveJudging, n: int) -> None:
    """Wait (a generous cap, never a fixed time) until ``n`` samples are judged."""
    for _ in range(3000):
        if service.counts["judged"] + service.counts["failed"] >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"judging did not finish: {service.counts}")


async def test_judged_samples_give_an_estimate_with_an_interval_and_are_stored(tmp_path) -> None:
    recorder = Recording()
    with StandinLLM() as llm:
        service = live(tmp_path, llm, recorder)
        worker = asyncio.get_running_loop().create_task(service.run_forever())
        try:
            orders = [["good", "some", "off"], ["off", "some", "good"], ["some", "good", "off"]]
            assert [service.offer(sample(o, f"r{i}")) for i, o in enumerate(orders)] == [None] * 3
            await judged(service, 3)
        finally:
            worker.cancel()
    records = read_records(tmp_path / "judged.jsonl")
    assert [r["status"] for r in records] == ["judged"] * 3
    assert records[0]["grades"] == {"good": 5, "some": 3, "off": 1}
    assert records[0]["judge_calls"] == 3 and records[0]["tokens"] > 0 and len(records[0]["calls"]) == 3
    # each value is the tie-aware metric of the served order against the judged grades
    golden = GoldenQuery("r1", QUERY, records[0]["grades"])
    expected = [evaluate_ranking(golden, [(d, 1.0 - i / 10) for i, d in enumerate(o)], variant="primary",
                                 source="live", measures=["ndcg@10"]).stats["ndcg@10"]["expected"] for o in orders]
    assert [r["values"]["primary"]["ndcg@10"] for r in records] == pytest.approx(expected)
    assert expected[0] == 1.0 > expected[2] > expected[1]
    estimate = service.estimates()["primary"]["ndcg@10"]
    assert estimate["n"] == 3 and estimate["point"] == pytest.approx(np.mean(expected))
    assert estimate["low"] < estimate["point"] < estimate["high"]
    assert recorder.get("steadyrank_live_judged_quality", variant="primary", metric="ndcg", k="10",
                        bound="low") == estimate["low"]
    assert recorder.get("steadyrank_live_judged_samples_total", outcome="judged") == 3
    assert recorder.get("steadyrank_live_judged_judge_calls_total") == 9


def test_the_token_bucket_admits_the_rate_and_no_more() -> None:
    now = [0.0]
    bucket = TokenBucket(rate=2 / 60, capacity=1, clock=lambda: now[0])  # 2 per minute
    assert [bucket.take(), bucket.take()] == [True, False]
    now[0] = 29.0
    assert not bucket.take()
    now[0] = 30.0
    assert bucket.take() and not bucket.take()


async def test_the_daily_cap_is_checked_before_judging_and_restored_from_the_store(tmp_path) -> None:
    now = [1_700_000_000.0]  # 2023-11-14 UTC
    with StandinLLM() as llm:
        service = live(tmp_path, llm, clock=lambda: now[0], max_calls_per_day=4)
        assert service.offer(sample(["good", "some", "off"])) is None  # 3 calls reserved
        assert service.offer(sample(["good", "some"])) == "capped"  # 3 + 2 > 4: refused before any call
        await service.judge_sample(service.queue.get_nowait())
        assert llm.requests == 3
        restarted = live(tmp_path, llm, clock=lambda: now[0], max_calls_per_day=4)
        assert restarted.used[0] == 3 and restarted.restored == 1
        assert restarted.offer(sample(["good", "some", "off"])) == "capped"
        assert restarted.offer(sample(["good", "some"])) == "capped"  # 3 + 2 > 4
        assert restarted.offer(sample(["good"])) is None  # 3 + 1 ≤ 4
        assert restarted.estimates()["primary"]["ndcg@10"]["n"] == 1  # the estimate is restored too
        now[0] += 86_400  # the next UTC day starts a fresh count
        assert restarted.offer(sample(["good", "some", "off"])) is None
        assert restarted.status()["judge_calls_today"] == 0


async def test_a_full_queue_drops_and_counts_while_a_blocked_judge_holds_the_worker(tmp_path) -> None:
    gate = threading.Event()
    with StandinLLM(gate=gate) as llm:
        service = live(tmp_path, llm, queue_size=1)
        worker = asyncio.get_running_loop().create_task(service.run_forever())
        try:
            assert service.offer(sample(["good"], "a")) is None
            for _ in range(3000):  # the worker has taken it and waits on the judge
                if llm.in_flight >= 1:
                    break
                await asyncio.sleep(0.01)
            assert llm.in_flight >= 1
            assert service.offer(sample(["good"], "b")) is None  # the queue's one slot
            assert [service.offer(sample(["good"], c)) for c in "cde"] == ["dropped"] * 3
            assert service.counts["judged"] == 0
            gate.set()
            await judged(service, 2)
        finally:
            gate.set()
            worker.cancel()
    assert service.counts == {"judged": 2, "failed": 0, "unsampled": 0, "capped": 0, "dropped": 3, "no_text": 0}


async def test_a_failing_judge_is_counted_stored_and_charged(tmp_path) -> None:
    with StandinLLM(fail_first=100) as llm:
        service = live(tmp_path, llm)
        assert service.offer(sample(["good", "off"])) is None
        record = await service.judge_sample(service.queue.get_nowait())
    assert record["status"] == "failed" and "JudgeError" in record["error"]
    assert service.counts["failed"] == 1 and service.used[0] == 2
    assert read_records(tmp_path / "judged.jsonl")[0]["status"] == "failed"


def test_a_search_without_texts_is_not_judged(tmp_path) -> None:
    with StandinLLM() as llm:
        service = live(tmp_path, llm)
        blind = {**sample(["good"]), "served": [{"id": "good", "score": 1.0, "text": None}]}
        assert service.offer(blind) == "no_text"


def test_the_store_tolerates_a_torn_tail_and_cuts_it_before_appending(tmp_path) -> None:
    path = tmp_path / "judged.jsonl"
    store = JudgmentStore(path)
    assert store.open() == []
    for day in ("2026-01-01", "2026-01-02"):
        store.append({"day": day, "status": "judged", "judge_calls": 1, "tokens": 2})
    whole = path.read_bytes()
    line = json.dumps({"v": 1, "day": "2026-01-03", "status": "judged", "judge_calls": 7}).encode() + b"\n"
    for cut in (1, len(line) // 2, len(line) - 1):  # a crash after any prefix of the last line's write
        path.write_bytes(whole + line[:cut])
        assert [r["day"] for r in read_records(path)] == ["2026-01-01", "2026-01-02"]
    reopened = JudgmentStore(path)
    assert len(reopened.open()) == 2 and path.read_bytes() == whole
    reopened.append({"day": "2026-01-04", "status": "judged"})
    assert [r["day"] for r in read_records(path)] == ["2026-01-01", "2026-01-02", "2026-01-04"]
    path.write_bytes(whole + b"{not json\n" + whole)  # damage before the end is refused, not skipped
    with pytest.raises(StoreDamagedError, match=":3:"):
        read_records(path)


async def test_with_a_canary_both_variants_are_measured_on_one_judged_pool(tmp_path) -> None:
    """The canary's ranking comes from a stand-in Searcher (a shadow copy of the search; no model runs
    here): it serves "good" first where the primary served it last."""
    calls = []

    async def search(call: Any) -> dict[str, Any]:
        calls.append(call)
        return {"results": [{"id": d, "relevance_score": 1.0 - i / 10, "text": PASSAGES[d]}
                            for i, d in enumerate(["good", "some"])]}

    with StandinLLM() as llm:
        settings = LiveJudgingSettings(enabled=True, store=str(tmp_path / "judged.jsonl"), rate_per_minute=60)
        judge = functools.partial(live_judge, str(judge_config(tmp_path / "judge.json", llm.base_url)))
        service = LiveJudging(settings, judge, Recording(), search, ("primary", "canary"))
        assert service.offer(sample(["off", "some", "good"])) is None
        record = await service.judge_sample(service.queue.get_nowait())
    assert calls[0].variant == "canary" and calls[0].shadow and calls[0].return_documents
    assert record["served"] == {"primary": ["off", "some", "good"], "canary": ["good", "some"]}
    assert llm.requests == 3  # the union of both lists, each passage graded once
    assert record["values"]["canary"]["ndcg@10"] == 1.0 > record["values"]["primary"]["ndcg@10"]
    assert service.estimates()["canary"]["ndcg@10"]["n"] == 1


@pytest.mark.parametrize("section, message", [
    ({"enabled": True}, "needs `store`"),
    ({"floors": {"mrr@10": 0.5}}, "not in `measures`"),
    ({"measures": ["ndcg@10", "harm@10"], "floors": {"harm@10": 0.1}}, "lower-is-better"),
    ({"measures": ["ndcg@x"]}, "ndcg@x"),
])
def test_settings_refuse_what_cannot_work(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LiveJudgingSettings(**section)


async def test_the_canary_copy_is_judged_only_within_the_cap(tmp_path) -> None:
    """The primary served 2 passages, the canary adds 1 more: with a cap of 2 calls a day only the
    primary is judged (stand-in Searcher as above)."""

    async def search(call: Any) -> dict[str, Any]:
        return {"results": [{"id": d, "relevance_score": 0.5, "text": PASSAGES[d]} for d in ("good", "some")]}

    with StandinLLM() as llm:
        settings = LiveJudgingSettings(enabled=True, store=str(tmp_path / "judged.jsonl"), max_calls_per_day=2)
        judge = functools.partial(live_judge, str(judge_config(tmp_path / "judge.json", llm.base_url)))
        service = LiveJudging(settings, judge, Recording(), search, ("primary", "canary"))
        assert service.offer(sample(["off", "some"])) is None
        record = await service.judge_sample(service.queue.get_nowait())
    assert list(record["served"]) == ["primary"] and llm.requests == 2 and service.used[0] == 2

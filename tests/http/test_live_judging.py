"""Issue 41, live judged samples, in process: a judge that blocks does not delay a single request.

The real ``create_app`` with the stand-in components of conftest.py and the real shadow evaluator
with ``quality.live_judging`` on. No LLM runs on the test machines: the judge is the stand-in chat
model of the ``golden build`` tests (``tests/golden/llm_standin.py``) through the real
``openai-chat`` judge, held by an event (``gate``) so that it answers nothing until released. While
it holds a sample, 40 ``/v1/rerank`` requests all complete; only after the gate opens are the samples
judged. Event-based throughout: the test waits for the judge's request to arrive and for the
judged count, each under a generous cap, never for a fixed time.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
from typing import Any

import pytest

from steadyrank.serve.server.hosting.colocated import LocalHandle
from steadyrank.serve.server.hosting.graph import live_judge
from steadyrank.serve.server.quality.evaluator import ShadowEvaluator
from steadyrank.serve.server.quality.judgment_store import read_records
from steadyrank.serve.server.quality.service import GoldenProfile
from tests.golden.llm_standin import StandinLLM, judge_config
from tests.http.conftest import build

pytestmark = pytest.mark.anyio

QUERY = "restart a crashed systemd service"
DOCUMENTS = ["Bake bread at 220 degrees.", "Restart a crashed systemd service with Restart=on-failure.",
             "The systemd service manager starts daemons."]


async def until(condition: Any, what: str) -> None:
    for _ in range(6000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{what} did not happen")


async def test_requests_complete_while_the_judge_blocks_and_are_judged_after(tmp_path) -> None:
    golden = tmp_path / "golden.jsonl"
    golden.write_text(json.dumps({"query_id": "q1", "query": "list open ports", "judgments": {"d1": 5}}) + "\n")
    gate = threading.Event()
    with StandinLLM(gate=gate) as llm:
        config = judge_config(tmp_path / "judge.json", llm.base_url, timeout_s=120)
        served = build({"quality": {"golden": str(golden), "interval_s": 3600, "canary_fraction": 0.0, "seed": 0,
                                    "live_judging": {"enabled": True, "judge": str(config), "rate_per_minute": 6000,
                                                     "burst": 100, "queue_size": 4,
                                                     "store": str(tmp_path / "judged.jsonl")}}})
        settings = served.services.settings
        evaluator = ShadowEvaluator(settings.quality, LocalHandle(served.searcher), served.hub.store, ("primary",),
                                    GoldenProfile(settings.search.default_mode, settings.search.denoise),
                                    functools.partial(live_judge, str(config)))
        served.services.evaluator = LocalHandle(evaluator)
        live = evaluator.live
        assert live is not None
        try:
            async with served.client() as c:
                first = await c.post("/v1/rerank", json={"query": QUERY, "documents": DOCUMENTS})
                assert first.status_code == 200
                await until(lambda: llm.in_flight >= 1, "the judge's first request")  # the judge now blocks
                codes = [(await c.post("/v1/rerank", json={"query": QUERY, "documents": DOCUMENTS})).status_code
                         for _ in range(40)]
                assert codes == [200] * 40  # every request answered while the judge held its sample
                await until(lambda: live.counts["dropped"] + live.queue.qsize() >= 40, "the hand-offs")
                assert live.counts["judged"] == 0 and live.counts["dropped"] == 40 - 4  # 4 queued, the rest dropped
                gate.set()
                await until(lambda: live.counts["judged"] >= 5, "judging after the release")
                quality = (await c.get("/v1/quality")).json()
        finally:
            gate.set()
            evaluator._replays.cancel()
            evaluator._live_worker.cancel()
    section = quality["live_judging"]
    assert section["samples"]["judged"] == 5 and section["samples"]["dropped"] == 36
    assert section["estimates"]["primary"]["ndcg@10"]["n"] == 5
    records = read_records(tmp_path / "judged.jsonl")
    assert len(records) == 5 and all(r["route"] == "rerank" for r in records)
    grades = records[0]["grades"]
    assert sorted(grades.values()) == [1, 3, 5] and all(d.startswith("sha256:") for d in grades)
    # the stand-in reranker served input order: the off-topic passage first, so nDCG@10 < 1
    assert 0 < section["estimates"]["primary"]["ndcg@10"]["point"] < 1

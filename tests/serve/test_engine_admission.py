"""Work-based admission inside the model replica (serve.app.deployments.common: ``admit``,
``admitted``, ``run_batch``; the machinery of ``Reranker.score`` and ``Embedder.embed``): a call is
refused up front when the model's queue would keep it past its deadline, and its units leave the
queue exactly once, when the model is done with them, however the call ends.

The batcher, the tickets, the compute executor and the metrics are the real ones; only the forward
pass is a stand-in that the test holds mid-batch (a real model cannot be paused at a chosen point).
No Ray.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from steadyrank.serve.app.admission import WorkQueue
from steadyrank.serve.app.deployments.batcher import RequestBatcher
from steadyrank.serve.app.deployments.common import Ticket, admit, admitted, run_batch
from steadyrank.serve.runtime.errors import DeadlineExceeded, OverloadedError
from steadyrank.serve.telemetry import MetricsStore, Recorder


class Engine:
    """A model replica's admission path around a held forward pass: job ``name`` computes once
    ``release(name)`` is called; a job named ``bad`` fails in its forward pass."""

    def __init__(self) -> None:
        self.work = WorkQueue(headroom=0.8, min_units=10, half_life_s=1e9)
        self.store = MetricsStore()
        self.recorder = Recorder(self.store, flush_interval_s=60)
        self.executor = ThreadPoolExecutor(max_workers=1)
        self.gates: dict[str, threading.Event] = {}
        self.started: list[str] = []
        self.batcher = RequestBatcher(self._run_batch, max_batch_size=1)

    def release(self, name: str) -> None:
        self.gates.setdefault(name, threading.Event()).set()

    def _forward(self, jobs: list[str]) -> list[str]:
        (name,) = jobs
        self.started.append(name)
        self.gates.setdefault(name, threading.Event()).wait(10)
        if name == "bad":
            raise RuntimeError("the forward pass failed")
        return [f"scored {name}"]

    async def _run_batch(self, jobs: list[tuple[str, Ticket]]) -> list[Any]:
        return await run_batch(self.executor, jobs, self._forward, self.recorder, "reranker")

    async def call(self, name: str, units: int, deadline_s: float | None = None) -> Any:
        """What ``Reranker.score`` does: admit, then queue on the batcher."""
        ticket = Ticket(None if deadline_s is None else time.time() + deadline_s)
        admit(self.work, units, ticket, self.recorder, "reranker")
        return await admitted(self.batcher, name, ticket, self.recorder, "reranker")

    def metric(self, name: str, **labels: str) -> float:
        self.recorder.flush()
        for family in text_string_to_metric_families(self.store.render().decode()):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    return sample.value
        return 0.0


async def until(condition: Any) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in 5 s")


@pytest.mark.parametrize("ending", ["computed", "queued_past_deadline", "started_past_deadline", "failed",
                                    "caller_gone"])
def test_a_calls_units_leave_the_queue_once_when_the_model_is_done_with_them(ending: str) -> None:
    """Call ``first`` (2 units) holds the forward pass; call ``second`` (3 units) waits behind it or
    runs, and ends as ``ending`` says. Its units stay in the queue while the model still has the
    job (queued or computing, even past its deadline: the caller's 504 does not free the model)
    and leave exactly once: when it is computed (counted as done), dropped before its forward pass
    (its deadline passed while queued, or its caller went away) or failed. ``first``'s units stay
    throughout: a second release would take them."""

    async def scenario() -> None:
        engine = Engine()
        first = asyncio.create_task(engine.call("first", 2))
        await until(lambda: engine.started == ["first"])
        name = "bad" if ending == "failed" else "second"
        deadline = 0.2 if ending.endswith("past_deadline") else None
        if ending == "started_past_deadline":  # second computes first, past its deadline
            engine.release("first")
            assert await first == "scored first"
            first = None
        second = asyncio.create_task(engine.call(name, 3, deadline))
        await until(lambda: engine.work.pending == 3 + (2 if first else 0))
        if ending.endswith("past_deadline"):
            await asyncio.sleep(0.3)  # its deadline passed; the model still has the job
            assert engine.work.pending == 3 + (2 if first else 0)
        if ending == "caller_gone":
            second.cancel()
            await until(lambda: engine.work.pending == 2)  # a queued job is dropped at once
        if first is not None:
            engine.release("first")
            assert await first == "scored first"
        engine.release(name)
        outcome = (await asyncio.gather(second, return_exceptions=True))[0]
        expected = {"computed": str, "queued_past_deadline": DeadlineExceeded, "started_past_deadline": str,
                    "failed": RuntimeError, "caller_gone": asyncio.CancelledError}[ending]
        assert isinstance(outcome, expected), outcome
        assert engine.work.pending == 0
        computed = {"computed": 5, "queued_past_deadline": 2, "started_past_deadline": 5, "failed": 2,
                    "caller_gone": 2}[ending]
        assert engine.work.finished_total + 2 == computed  # the first answer ends start-up, uncounted
        assert engine.metric("steadyrank_queued_work_units", model="reranker") == 0
        if ending in ("queued_past_deadline", "caller_gone"):
            assert engine.started == ["first"], "a dropped job reached the forward pass"

    asyncio.run(scenario())


def test_a_call_the_queue_cannot_finish_in_time_is_refused_before_it_is_queued() -> None:
    """After learning 10 units/s with 200 units queued, a call of 50 units under a 30 s deadline
    ((200 + 50) / 10 = 25 s > 0.8 × 30 s) is refused with Retry-After 25 s, counted, and takes no
    units; one of 30 units fits (23 s) and is taken; a call without a deadline is never refused."""
    engine = Engine()
    work = engine.work
    work.start(1, 0.0)
    work.finish(1, 1.0)
    work.start(100, 1.0)
    work.finish(100, 11.0)
    work.start(200, 11.0)
    with pytest.raises(OverloadedError) as refused:
        admit(work, 50, Ticket(time.time() + 30), engine.recorder, "reranker")
    assert refused.value.retry_after_s == 25 and work.pending == 200
    assert engine.metric("steadyrank_requests_dropped_total", deployment="reranker", reason="overloaded") == 1
    ticket = Ticket(time.time() + 30)
    admit(work, 30, ticket, engine.recorder, "reranker")
    assert work.pending == 230
    ticket.settle(True)
    ticket.settle(True)  # settled once only
    assert work.pending == 200
    admit(work, 10_000, Ticket(None), engine.recorder, "reranker")
    assert work.pending == 10_200


def test_search_and_shadow_calls_are_admitted_by_the_real_reranker(tiny_cross_encoder_dir) -> None:
    """The real ``Reranker`` (a tiny random cross-encoder, FP32) behind a real ``Searcher`` (a
    stand-in embedder and a stand-in retriever of three documents, which stand for the bundled
    embedder and a FAISS/BM25 index), in process. Idle, a search is scored and its units come and
    go. With 30 s of work queued at the reranker, a user search (deadline 30 s) is refused with the
    reranker's 503 before any forward pass, and so is a shadow replay (its budget:
    ``quality.shadow_max_wait_s``, 20 s); a rerank without a deadline is still admitted."""
    from steadyrank.serve.app.colocated import LocalHandle
    from steadyrank.serve.app.deployments.reranker import Reranker
    from steadyrank.serve.app.deployments.searcher import Searcher
    from steadyrank.serve.app.settings import load_settings
    from tests.http.conftest import FakeEmbedder
    from tests.http.test_tracing import StandInRetriever

    model = {"path": str(tiny_cross_encoder_dir), "precision": "fp32", "scoring": "hps"}
    settings = load_settings({"reranker": model, "search": {"default_mode": "dense"}})
    store = MetricsStore()
    reranker = Reranker.func_or_class(settings, model, "primary", store)
    reranker.reconfigure(settings.deployments.reranker.ray_options()["user_config"])
    searcher = Searcher.func_or_class(settings, LocalHandle(FakeEmbedder()), LocalHandle(StandInRetriever()),
                                      LocalHandle(reranker), None, store)
    forwards = []
    score_jobs = reranker._score_jobs
    reranker._score_jobs = lambda jobs: forwards.append(len(jobs)) or score_jobs(jobs)

    async def scenario() -> None:
        outcome = await searcher.search({"query": "a question", "top_n": 2, "deadline": time.time() + 30})
        assert len(outcome.results) == 2 and forwards == [1]
        assert reranker.work.pending == 0
        work = reranker.work
        work.headroom, work.min_units, work.half_life_s = 0.8, 10, 1e9
        work.start(100, 0.0)
        work.finish(100, 10.0)  # 10 documents/s (the earlier answers ended start-up)
        work.start(300, 10.0)  # 30 s queued
        done = len(forwards)
        with pytest.raises(OverloadedError, match="reranker has about 30 s of work queued"):
            await searcher.search({"query": "a question", "top_n": 2, "deadline": time.time() + 30})
        with pytest.raises(OverloadedError):
            await searcher.search({"query": "a question", "top_n": 2, "shadow": True})
        assert len(forwards) == done and work.pending == 300, "a refused call reached the model or kept units"
        await reranker.score("q", ["a", "b"])  # no deadline: admitted
        assert len(forwards) == done + 1 and work.pending == 300

    asyncio.run(scenario())
    reranker.recorder.flush()
    dropped = [s for f in text_string_to_metric_families(store.render().decode()) for s in f.samples
               if s.name == "steadyrank_requests_dropped_total" and s.labels.get("reason") == "overloaded"]
    assert [(s.labels["deployment"], s.value) for s in dropped] == [("reranker", 2.0)]

"""One ingress replica's admission state (serve.server.admission.gate): the gate the settings build,
the work a request is admitted as, and the 503 that work-based admission answers. Pure Python."""

from __future__ import annotations

from steadyrank.serve.errors import ErrorKind
from steadyrank.serve.server.admission.gate import MODELS, Gate, Work, search_work
from steadyrank.serve.server.admission.work_queue import WorkQueue
from steadyrank.serve.settings import AdmissionSettings, load_settings


def learned(pending: int, rate: float = 10.0) -> WorkQueue:
    """A queue that learned ``rate`` units/s (after start-up) and has ``pending`` units queued."""
    queue = WorkQueue(min_units=10, headroom=0.8, half_life_s=1e9)
    queue.start(1, 0.0)
    queue.finish(1, 1.0)  # the first answer ends start-up
    queue.start(100, 1.0)
    queue.finish(100, 1.0 + 100 / rate)
    queue.start(pending, 20.0)
    return queue


def test_the_settings_build_the_pacer_and_every_models_queue() -> None:
    gate = Gate.from_settings(AdmissionSettings(headroom=2.5, refusals_per_s=7.0, refusal_max_wait_s=1.5))
    assert (gate.pacer.rate, gate.pacer.max_wait_s) == (7.0, 1.5)
    assert sorted(gate.work) == sorted(MODELS) and all(q.headroom == 2.5 for q in gate.work.values())
    assert (gate.in_flight, gate.draining) == (0, False)


def test_the_work_of_a_body_is_its_models_low_estimate() -> None:
    gate = Gate.from_settings(AdmissionSettings())
    assert gate.sized_work("reranker", 50_000) == Work("reranker", 1)  # nothing seen yet
    gate.work["reranker"].observe_body(40_000, 100)
    assert gate.sized_work("reranker", 50_000) == Work("reranker", 125)
    assert gate.sized_work("embedder", 50_000) == Work("embedder", 1)  # each model learns its own


def test_a_work_refusal_states_the_wait_and_asks_the_client_back_after_it() -> None:
    gate = Gate.from_settings(AdmissionSettings())
    gate.work["reranker"] = learned(pending=300)
    assert gate.work_refusal("reranker", 10, deadline_s=60.0) is None  # 31 s ≤ 0.8 × 60 s
    refused = gate.work_refusal("reranker", 10, deadline_s=30.0)  # 31 s > 0.8 × 30 s
    assert refused is not None and refused.kind is ErrorKind.OVERLOADED and refused.retry_after_s == 31
    assert "the reranker has about 31 s of work queued" in refused.message and "deadline of 30 s" in refused.message


def test_a_search_is_admitted_as_k_low_candidates_or_one_embedding() -> None:
    assert search_work(load_settings({})) == Work("embedder", 1)  # reranks from the stored vectors
    cross = load_settings({"reranker": {"path": "cross-encoder/ms-marco-MiniLM-L-6-v2"}})
    assert search_work(cross) == Work("reranker", cross.routing_policy().k_low)

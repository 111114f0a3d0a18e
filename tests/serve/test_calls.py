"""The typed calls of serve/server/calls.py (issue 40, "Typed calls"): the :class:`Deadline` value
(monotonic, clamped, rebuilt from its seconds left when it crosses a process or host), the
components' typed answers (:class:`ScoreOutcome`, :class:`EmbedOutcome`) and the model components'
deadline drops through :class:`~serve.server.admission.deadline.Ticket`.

The clock is the one thing replaced here (calls.py's ``monotonic``, by a settable one), so
that the assertions are about values, never about how long a test took; the batch drop runs on a
real executor and counts into the real Recorder and metrics store."""

from __future__ import annotations

import asyncio
import pickle
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from pydantic import ValidationError

from steadyrank.serve.errors import DeadlineExceeded
from steadyrank.serve.server import calls
from steadyrank.serve.server.admission.deadline import Ticket
from steadyrank.serve.server.calls import Deadline, EmbedOutcome, ScoreOutcome, SearchCall
from steadyrank.serve.server.components.common import Failed, admitted, run_batch
from steadyrank.serve.server.components.metrics_hub import MetricsHub
from steadyrank.serve.telemetry import Recorder


class Clock:
    """A settable ``time.monotonic``: ``now`` seconds."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock(1000.0)
    monkeypatch.setattr(calls, "monotonic", clock)
    return clock


def test_remaining_decreases_with_the_clock_and_clamps_at_zero(clock: Clock) -> None:
    deadline = Deadline.after(5.0)
    assert deadline.at == 1005.0 and deadline.remaining() == 5.0 and not deadline.expired()
    clock.now = 1003.5
    assert deadline.remaining() == 1.5 and not deadline.expired()
    clock.now = 1005.0  # the instant itself counts as passed
    assert deadline.remaining() == 0.0 and deadline.expired()
    clock.now = 2000.0
    assert deadline.remaining() == 0.0 and deadline.expired()


def test_after_counts_from_a_given_instant(clock: Clock) -> None:
    """A request's deadline runs from its arrival: one that arrived 4 s ago with 3 s has passed."""
    assert Deadline.after(3.0, since=996.0).expired()
    assert Deadline.after(10.0, since=996.0).remaining() == 6.0


def test_a_deadline_crosses_hosts_as_its_seconds_left(clock: Clock) -> None:
    """Pickled on one host (clock at 1000) and unpickled on another whose monotonic clock reads 7:
    the same 4 s are left there, not the sender's instant (which would mean 998 s on the receiver)."""
    sent = pickle.dumps(Deadline.after(4.0))
    clock.now = 7.0
    received = pickle.loads(sent)
    assert isinstance(received, Deadline) and received.at == 11.0 and received.remaining() == 4.0
    clock.now = 11.0
    assert received.expired()


def test_an_expired_deadline_arrives_expired(clock: Clock) -> None:
    sent = pickle.dumps(Deadline.after(1.0, since=900.0))
    clock.now = 5.0
    assert pickle.loads(sent).expired()


def test_a_search_call_carries_a_deadline_and_keeps_it_out_of_its_mapping(clock: Clock) -> None:
    """The SearchCall takes only a Deadline (an epoch float is refused), pickles it as its seconds
    left (ingress → Searcher → models, each maybe on another host) and leaves it out of the mapping
    that the evaluator and live judging get."""
    call = SearchCall(query="q", deadline=Deadline.after(2.0))
    with pytest.raises(ValidationError):
        SearchCall(query="q", deadline=1.7e9)  # type: ignore[arg-type]
    assert "deadline" not in call.model_dump()
    sent = pickle.dumps(call)
    clock.now = 50.0
    received = pickle.loads(sent)
    assert received.deadline is not None and received.deadline.remaining() == 2.0


def test_score_outcome_joins_parts_and_is_empty_without_any() -> None:
    a = ScoreOutcome(np.array([0.5, 0.25], np.float32), np.array([1.0, -1.0], np.float32), np.array([True, False]))
    b = ScoreOutcome(np.array([0.75], np.float32), np.array([2.0], np.float32), np.array([False]))
    joined = ScoreOutcome.joined([a, b])
    assert joined.scores.tolist() == [0.5, 0.25, 0.75] and joined.keys.tolist() == [1.0, -1.0, 2.0]
    assert joined.truncated.tolist() == [True, False, False]
    empty = ScoreOutcome.joined([])
    assert (empty.scores.dtype, empty.keys.dtype, empty.truncated.dtype) == (np.float32, np.float32, np.bool_)
    assert len(empty.scores) == len(empty.keys) == len(empty.truncated) == 0


def test_typed_answers_pickle_with_their_arrays() -> None:
    """What a Ray call's answer goes through between processes."""
    embed = pickle.loads(pickle.dumps(EmbedOutcome(np.eye(2, dtype=np.float32), tokens=7)))
    assert embed.tokens == 7 and embed.vectors.dtype == np.float32 and np.array_equal(embed.vectors, np.eye(2))
    score = pickle.loads(pickle.dumps(ScoreOutcome(np.ones(3, np.float32), np.zeros(3, np.float32), np.ones(3, bool))))
    assert score.scores.tolist() == [1, 1, 1] and score.truncated.dtype == np.bool_


def dropped(hub: MetricsHub, recorder: Recorder, reason: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    recorder.flush()
    for family in text_string_to_metric_families(hub.store.render().decode()):
        for sample in family.samples:
            if sample.name == "steadyrank_requests_dropped_total" and sample.labels.get("reason") == reason:
                return sample.value
    return 0.0


def test_a_job_past_its_deadline_is_dropped_before_the_forward_pass(clock: Clock) -> None:
    """Of a batch, the job whose Deadline passed while it was queued is failed unscored (and
    counted); the live one runs; a job without a deadline always runs."""
    hub = MetricsHub()
    recorder = Recorder(hub.store, flush_interval_s=60)
    ran: list[str] = []

    def run(jobs: list[str]) -> list[str]:
        ran.extend(jobs)
        return [j.upper() for j in jobs]

    jobs = [("late", Ticket(Deadline.after(1.0))), ("live", Ticket(Deadline.after(10.0))), ("open", Ticket())]
    clock.now += 2.0
    with ThreadPoolExecutor(max_workers=1) as executor:
        out = asyncio.run(run_batch(executor, jobs, run, recorder, "reranker"))
    assert ran == ["live", "open"] and out[1:] == ["LIVE", "OPEN"]
    assert isinstance(out[0], Failed) and isinstance(out[0].error, DeadlineExceeded)
    assert jobs[1][1].started and not jobs[0][1].started
    assert dropped(hub, recorder, "deadline") == 1


def test_a_job_whose_deadline_passed_is_refused_before_it_is_queued(clock: Clock) -> None:
    hub = MetricsHub()
    recorder = Recorder(hub.store, flush_interval_s=60)
    queued: list[object] = []

    async def batched(item: object) -> object:
        queued.append(item)
        return "scored"

    with pytest.raises(DeadlineExceeded):
        asyncio.run(admitted(batched, "job", Ticket(Deadline.after(-1.0)), recorder, "embedder"))
    assert queued == [] and dropped(hub, recorder, "deadline") == 1
    assert asyncio.run(admitted(batched, "job", Ticket(Deadline.after(1.0)), recorder, "embedder")) == "scored"

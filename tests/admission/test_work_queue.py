"""Work-based admission (serve.server.admission.work_queue.WorkQueue): the rate it learns from
completions, the requests it refuses and the units it estimates in a body. Pure Python, simulated
clock (seconds)."""

from __future__ import annotations

import pytest

from steadyrank.serve.server.admission.work_queue import SIZE_WINDOW, WorkQueue


def run_steady(queue: WorkQueue, rate: float, requests: int, units: int, start: float = 0.0) -> float:
    """Requests of ``units`` served back to back at ``rate`` units/s, one at a time; returns the clock."""
    now = start
    for _ in range(requests):
        queue.start(units, now)
        now += units / rate
        queue.finish(units, now)
    return now


def test_no_rate_until_enough_units_finished_admits_everything() -> None:
    queue = WorkQueue(min_units=32)
    queue.start(1000, 0.0)
    assert queue.rate() is None and queue.refusal(1000, deadline_s=1.0) is None
    queue.finish(20, 5.0)
    assert queue.rate() is None  # 20 < 32 units seen


def test_rate_is_units_per_busy_second_and_idle_time_does_not_count() -> None:
    queue = WorkQueue(min_units=10, half_life_s=1e9)
    now = run_steady(queue, rate=25.0, requests=10, units=20)
    assert queue.rate() == pytest.approx(25.0)
    run_steady(queue, rate=25.0, requests=10, units=20, start=now + 3600.0)  # an idle hour in between
    assert queue.rate() == pytest.approx(25.0)


def test_refuses_what_cannot_finish_within_the_headroom_of_its_deadline() -> None:
    queue = WorkQueue(min_units=10, headroom=0.8, half_life_s=1e9)
    now = run_steady(queue, rate=10.0, requests=10, units=10)
    queue.start(50, now)  # 5 s of work queued
    # a 10-unit request would be done in (50 + 10) / 10 = 6 s; with a 5 s deadline the budget is 4 s
    assert queue.predicted_wait(10) == pytest.approx(6.0)
    assert queue.refusal(10, deadline_s=5.0) == 6  # Retry-After: the predicted wait, ceil(6)
    assert queue.refusal(10, deadline_s=7.5) is None  # budget 6 s
    queue.finish(50, now + 5.0)
    assert queue.pending == 0
    assert queue.refusal(10_000, deadline_s=1.0) is None  # nothing pending: an idle deployment always tries


def test_rate_follows_a_change_with_the_half_life() -> None:
    queue = WorkQueue(min_units=10, half_life_s=10.0)
    now = run_steady(queue, rate=10.0, requests=50, units=10)  # 50 busy seconds at 10/s
    assert queue.rate() == pytest.approx(10.0, rel=0.05)
    run_steady(queue, rate=40.0, requests=400, units=10, start=now)  # 100 busy seconds at 40/s
    assert queue.rate() == pytest.approx(40.0, rel=0.05)


def test_failed_calls_free_their_units_without_counting_as_done() -> None:
    queue = WorkQueue(min_units=1, half_life_s=1e9)
    queue.start(10, 0.0)
    queue.finish(10, 2.0, completed=False)
    assert queue.pending == 0 and queue.finished_total == 0 and queue.rate() is None


def test_the_wait_before_the_first_answer_is_start_up_not_service() -> None:
    """A request sent while the model replica still loads waits there for its whole start-up; had
    that wait counted as busy time, the learned rate would be a fraction of the real one and the
    first minutes of load would be refused (seen: 8 clients x 16 texts refused with "about 28 s
    of work queued" where 4 s was true)."""
    queue = WorkQueue(min_units=10, half_life_s=1e9)
    queue.start(1, 0.0)
    queue.finish(1, 30.0)  # the first answer came after a 30 s model load
    run_steady(queue, rate=20.0, requests=10, units=16, start=30.0)
    assert queue.rate() == pytest.approx(20.0)
    queue.start(7 * 16, 100.0)
    assert queue.refusal(16, deadline_s=30.0) is None  # (112 + 16) / 20 = 6.4 s ≤ 24 s


def test_units_in_a_body_are_estimated_low_from_the_largest_recent_bytes_per_unit() -> None:
    queue = WorkQueue()
    assert queue.units_in(50_000) == 1  # no request seen yet: one unit, the handler decides the rest
    queue.observe_body(40_000, 100)  # 400 bytes per document
    queue.observe_body(50_000, 100)  # 500
    queue.observe_body(None, 100)  # no Content-Length: nothing learned
    assert queue.units_in(50_000) == 100  # shaped like the recent requests: exact
    assert queue.units_in(49_999) == 99  # rounded down
    assert queue.units_in(200) == 1 and queue.units_in(None) == 1
    for _ in range(SIZE_WINDOW):  # the 500-byte request leaves the window
        queue.observe_body(25_000, 100)
    assert queue.units_in(50_000) == 200

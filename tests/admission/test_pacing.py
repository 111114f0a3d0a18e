"""The pacing of overload refusals (serve.server.admission.pacing.RefusalPacer). Pure Python,
simulated clock (seconds)."""

from __future__ import annotations

import pytest

from steadyrank.serve.server.admission.pacing import RefusalPacer


def test_pacer_spaces_refusals_one_over_rate_apart_in_arrival_order() -> None:
    pacer = RefusalPacer(rate=20.0, max_wait_s=5.0)
    waits = [pacer.wait(10.0) for _ in range(5)]  # a burst: five refusals at the same instant
    assert waits == pytest.approx([0.0, 0.05, 0.10, 0.15, 0.20])
    assert pacer.wait(10.0 + 1.0) == 0.0  # after a lull, the next goes out at once


def test_pacer_answers_at_once_past_its_longest_wait_without_taking_a_slot() -> None:
    pacer = RefusalPacer(rate=1.0, max_wait_s=2.5)
    assert [pacer.wait(0.0) for _ in range(3)] == [0.0, 1.0, 2.0]
    assert pacer.wait(0.0) == 0.0  # its slot would be 3 s away: > 2.5, answered at once
    assert pacer.wait(0.0) == 0.0  # ... and it reserved nothing: the queue still ends at 3 s
    assert pacer.wait(0.6) == pytest.approx(2.4)


def test_pacing_off_answers_everything_at_once() -> None:
    pacer = RefusalPacer(rate=0.0)
    assert [pacer.wait(0.0) for _ in range(100)] == [0.0] * 100

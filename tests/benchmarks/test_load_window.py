"""The closed-loop window of the serving benchmarks (benchmarks/_load.py): pure bookkeeping, no clock waits."""

from __future__ import annotations

import pytest

from benchmarks._load import Window

pytestmark = pytest.mark.unit


def test_a_window_that_fills_only_while_the_loop_drains_spans_the_whole_run() -> None:
    """A row whose ``level`` completions arrive only after the loop stopped (a server answering
    32 requests at once, late) must not report a window that starts after it ended (a negative
    length and a goodput of -0.0): it spans the whole run instead."""
    w = Window(level=2, duration=1.0, warmup=0.0, min_requests=1, max_duration=0.0)
    assert w.should_stop()  # max_duration 0: stopped at once, nothing completed
    stopped = w.stopped_at
    assert stopped is not None
    w.add(stopped - 0.5, stopped + 1.0, True)  # both completions arrive during the drain
    w.add(stopped - 0.5, stopped + 2.0, True)
    start, end = w.bounds()
    assert (start, end) == (w.begin, stopped) and end - start >= 0
    assert w.summary()["window_s"] >= 0 and w.summary()["requests"] == 0


def test_a_filled_window_starts_at_the_level_th_completion() -> None:
    w = Window(level=2, duration=0.0, warmup=0.0, min_requests=1, max_duration=60.0)
    w.begin -= 10.0  # a run that began 10 s ago, its completions in the past
    t = w.begin
    w.add(t, t + 0.1, True)
    w.add(t, t + 0.2, True)
    w.add(t, t + 0.3, False)
    assert w.should_stop()
    start, _ = w.bounds()
    assert start == t + 0.2

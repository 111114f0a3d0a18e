"""The refusal before a request's body is read (serve.server.admission.early.early_refusal), as a pure
function of the gate, the settings and the request's estimated work. The HTTP side (the body left
unread, the dropped-request metric) is tests/http/test_admission.py's."""

from __future__ import annotations

import pytest

from steadyrank.serve.errors import ErrorKind
from steadyrank.serve.server.admission.early import early_refusal
from steadyrank.serve.server.admission.gate import Gate, Work
from steadyrank.serve.settings import AdmissionSettings, LimitsSettings
from tests.admission.test_gate import learned

ADMISSION = AdmissionSettings(max_in_flight=4)
LIMITS = LimitsSettings(request_timeout_s=30.0, retry_after_s=2)
WORK = Work("reranker", 10)


def never_asked() -> float:
    raise AssertionError("the request's own deadline was asked")


def gate(pending: int | None = None) -> Gate:
    """A fresh gate; with ``pending``, the reranker learned 10 units/s and has that many queued."""
    fresh = Gate.from_settings(ADMISSION)
    if pending is not None:
        fresh.work["reranker"] = learned(pending)
    return fresh


def test_a_draining_server_refuses_everything_first() -> None:
    draining = gate(pending=300)
    draining.draining, draining.in_flight = True, 4
    refused = early_refusal(draining, ADMISSION, LIMITS, WORK, never_asked)
    assert refused is not None and refused.reason == "shutting_down"
    assert refused.error.kind is ErrorKind.UNAVAILABLE and refused.error.retry_after_s == 2


@pytest.mark.parametrize(("in_flight", "refused"), [(3, False), (4, True), (5, True)])
def test_the_in_flight_slots(in_flight: int, refused: bool) -> None:
    full = gate()
    full.in_flight = in_flight
    got = early_refusal(full, ADMISSION, LIMITS, None, never_asked)  # no work known: the slots alone
    assert (got is not None) == refused
    if got is not None:
        assert got.reason == "overloaded" and got.error.kind is ErrorKind.OVERLOADED
        assert got.error.retry_after_s == 2 and "4 requests in flight" in got.error.message


def test_no_known_work_or_no_known_rate_admits() -> None:
    assert early_refusal(gate(pending=300), ADMISSION, LIMITS, None, never_asked) is None
    assert early_refusal(gate(), ADMISSION, LIMITS, Work("reranker", 10_000), never_asked) is None


def test_work_that_cannot_finish_within_the_longest_deadline_is_refused_stating_its_own() -> None:
    refused = early_refusal(gate(pending=300), ADMISSION, LIMITS, WORK, lambda: 12.0)
    assert refused is not None and refused.reason == "overloaded"
    assert refused.error.retry_after_s == 31  # (300 + 10) units / 10 per s
    assert "deadline of 12 s" in refused.error.message


def test_work_that_fits_the_longest_deadline_is_left_to_the_model_call() -> None:
    """20 s of queued work fits 0.8 × 30 s: admitted before the body without asking the request's own
    (shorter) deadline, which is checked at the model call."""
    assert early_refusal(gate(pending=190), ADMISSION, LIMITS, WORK, never_asked) is None
    assert early_refusal(gate(pending=190), ADMISSION, LIMITS, Work("embedder", 10), never_asked) is None

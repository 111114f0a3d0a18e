"""Refusal before the body: the decision the HTTP edge takes for a new scoring request before it reads
a byte of its body (each check answers before the next costs anything):

1. the server drains → ``unavailable`` 503 (drop reason ``shutting_down``);
2. this replica has ``admission.max_in_flight`` requests in flight → ``overloaded`` 503;
3. the endpoint's model has so much work queued that the request's estimated work (from its
   ``Content-Length``, :meth:`~serve.server.admission.work_queue.WorkQueue.units_in`; a search's is
   known without its body, :func:`~serve.server.admission.gate.search_work`) would be refused at the
   model call → ``overloaded`` 503 with ``Retry-After`` = the predicted wait.

Pure: the HTTP plumbing (which endpoint, which headers) is :mod:`serve.server.http.deps`'s."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from steadyrank.serve.errors import OverloadedError, SteadyrankError, UnavailableError
from steadyrank.serve.server.admission.gate import Gate, Work
from steadyrank.serve.settings import AdmissionSettings, LimitsSettings


class Refusal(NamedTuple):
    """Why a request is refused: ``reason``, the label of ``steadyrank_requests_dropped_total``, and
    the error answered."""

    reason: str
    error: SteadyrankError


def early_refusal(gate: Gate, admission: AdmissionSettings, limits: LimitsSettings, work: Work | None,
                  deadline_s: Callable[[], float]) -> Refusal | None:
    """Why a new request of ``work`` (None: not known before the body, only the first two checks)
    is refused before its body is read, or None (the module docstring). The work check is made
    under ``limits.request_timeout_s``, the longest deadline a request may have; only a refused
    request asks ``deadline_s()``, its own (which the error states, and which may raise for a bad
    ``X-Request-Timeout``)."""
    if gate.draining:
        return Refusal("shutting_down", UnavailableError("server shutting down: not taking new requests",
                                                         retry_after_s=limits.retry_after_s))
    if gate.in_flight >= admission.max_in_flight:
        return Refusal("overloaded", OverloadedError(f"server at capacity ({admission.max_in_flight} requests in "
                                                     "flight); retry later", retry_after_s=limits.retry_after_s))
    if work is None or gate.work[work.model].refusal(work.units, limits.request_timeout_s) is None:
        return None
    refused = gate.work_refusal(work.model, work.units, deadline_s())
    return None if refused is None else Refusal("overloaded", refused)

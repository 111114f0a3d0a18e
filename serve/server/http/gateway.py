"""The gateway between the routes and the components: deadlines, work-based admission, the repeat of
a call whose replica died, and the map from what a call raised to a domain error.

A request's deadline (:meth:`Gateway.deadline`, a :class:`~serve.server.calls.Deadline`) is
:meth:`Gateway.timeout_s` seconds from its arrival: reading, parsing, rendering and tokenising its
body count against it, and a call gets what is left (:meth:`Gateway.remaining`). Every call goes
through :meth:`Gateway.call` under its deadline, which the model components get too (they drop a
job still queued when it passes):

- a call whose replica died under it, or whose answer was lost with its node (what the host's
  ``Services.host.lost`` says: on Ray Serve :func:`serve.server.hosting.failures.replica_lost`), is
  made again, after 0.1 s, while the deadline allows (:mod:`serve.server.retry`): the host routes it
  to a live or replacement replica. Every call made here only reads (scoring, search, reports), so a
  repeat is safe; repeats are counted in ``steadyrank_request_retries_total{reason="replica_lost"}``;
- what the call raised becomes a :class:`~serve.errors.SteadyrankError` of its kind: the
  domain error a replica raised (out of the host's wrappers) as it is; the deadline passing →
  ``deadline_exceeded``; a host failure as ``Services.host.domain`` maps it (Ray Serve's full queue
  → ``overloaded``, a deployment without replicas → ``unavailable``); an index shard that did not
  answer → ``shard_unavailable``. Anything else is a bug and propagates (a JSON 500 with the
  request id).

:meth:`Gateway.model_call` adds work-based admission (:class:`~serve.server.admission.gate.Gate`) for
the model deployments.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from starlette.requests import Request

from steadyrank.serve.errors import (
    DeadlineExceeded,
    InvalidInputError,
    ShardUnavailable,
    SteadyrankError,
)
from steadyrank.serve.server.admission.gate import Gate
from steadyrank.serve.server.calls import Deadline
from steadyrank.serve.server.http.services import HostFailures, Services
from steadyrank.serve.server.retry import again_if_lost

logger = logging.getLogger("steadyrank.http")

#: Seconds the awaits of side calls get (model facts, the metrics render, a mirror hand-off).
SIDE_CALL_TIMEOUT_S = 10.0
T = TypeVar("T")


def past_deadline(deadline_s: float) -> DeadlineExceeded:
    """The 504 of a request whose deadline of ``deadline_s`` seconds passed."""
    return DeadlineExceeded(f"request took longer than its deadline of {deadline_s:g} s")


def root_cause(exc: BaseException) -> BaseException:
    """The exception a replica raised, out of Ray's wrappers (``RayTaskError.cause``)."""
    seen = 0
    while getattr(exc, "cause", None) is not None and seen < 5:
        exc = exc.cause  # type: ignore[attr-defined]
        seen += 1
    return exc


def domain_error(exc: BaseException, deadline_s: float, retry_after_s: int,
                 host: HostFailures) -> SteadyrankError | None:
    """The domain error ``exc`` (raised by a component call) stands for, or None for a bug."""
    from steadyrank.retrieval.shards import ShardsIncomplete

    cause = root_cause(exc)
    if isinstance(cause, SteadyrankError):
        if isinstance(cause, DeadlineExceeded):
            return past_deadline(deadline_s)
        return cause
    if isinstance(exc, asyncio.TimeoutError) or isinstance(cause, asyncio.TimeoutError):
        return past_deadline(deadline_s)
    hosted = host.domain(cause, retry_after_s) or host.domain(exc, retry_after_s)
    if hosted is not None:
        return hosted
    if isinstance(cause, ShardsIncomplete):
        return ShardUnavailable(f"index shard unavailable: {cause}", retry_after_s=retry_after_s)
    return None


class Gateway:
    """Deadlines, admission, retries and error mapping for one ingress replica's calls."""

    def __init__(self, services: Services, gate: Gate) -> None:
        self.services = services
        self.gate = gate
        self.limits = services.settings.limits
        self.facts: dict[str, dict[str, Any]] = {}
        self.background: set[asyncio.Task] = set()

    def timeout_s(self, request: Request) -> float:
        """The seconds the request may take from its arrival: ``limits.request_timeout_s``, or less when the client
        asks for less with ``X-Request-Timeout``."""
        limit = self.limits.request_timeout_s
        header = request.headers.get("x-request-timeout")
        if header is None:
            return limit
        try:
            asked = float(header)
        except ValueError:
            raise InvalidInputError(f"X-Request-Timeout must be a number of seconds, got {header[:32]!r}") from None
        if not asked > 0:
            raise InvalidInputError("X-Request-Timeout must be > 0")
        return min(asked, limit)

    def deadline(self, request: Request) -> Deadline:
        """The request's deadline: :meth:`timeout_s` seconds from its arrival (504 once it passed)."""
        deadline = Deadline.after(self.timeout_s(request), since=arrival(request))
        if deadline.expired():
            raise past_deadline(self.timeout_s(request))
        return deadline

    def remaining(self, request: Request) -> float:
        """Seconds left of the request's deadline (504 when none are)."""
        return self.deadline(request).remaining()

    async def within(self, request: Request, work: Awaitable[T]) -> T:
        """``work`` (the request's own work before its model call) under what is left of its deadline
        (504 beyond)."""
        try:
            return await asyncio.wait_for(work, self.remaining(request))
        except asyncio.TimeoutError:
            raise past_deadline(self.timeout_s(request)) from None

    async def call(self, deadline: Deadline, call: Callable[[], Awaitable[Any]], stated: float | None = None) -> Any:
        """Await ``call()`` under ``deadline`` (see the module docstring); a 504 states the request's
        deadline as ``stated`` seconds (default: the seconds ``deadline`` had left at the call)."""
        stated = deadline.remaining() if stated is None else stated
        try:
            return await again_if_lost(call, deadline, self._count_repeat, self.services.host.lost)
        except Exception as exc:
            mapped = domain_error(exc, stated, self.limits.retry_after_s, self.services.host)
            if mapped is None:
                raise
            raise mapped from None

    def _count_repeat(self) -> None:
        self.services.recorder.inc("steadyrank_request_retries_total", reason="replica_lost")

    async def model_call(self, request: Request, model: str, units: int, deadline: Deadline,
                         call: Callable[[], Awaitable[Any]], *, sized_by_body: bool = True,
                         computed: Callable[[Any], int] | None = None) -> Any:
        """:meth:`call` to a model deployment under work-based admission: ``units`` (documents or
        texts) are refused at once, 503 + ``Retry-After``, when the work queued at ``model`` would
        keep them past ``admission.headroom`` × the deadline. ``sized_by_body``: the units
        grow with the body (rerank, embeddings; not a search), so the request's body size per unit
        is noted first, for refusals before a body is read. ``computed(answer)``: the units the
        model actually did, when ``units`` was a low estimate (:func:`~serve.server.admission.gate.search_work`).

        The units leave the queue exactly once, when the model is done with them: at the answer or
        error; at once when the client goes away (the call is cancelled, so a job still queued at
        the model is dropped); and after a 504, not at the 504 but when the model call itself ends
        (:func:`settle`): the model still computes a job whose batch had started, and drops one
        still queued at the deadline it was given, so until then the work is still the model's."""
        queue = self.gate.work[model]
        if sized_by_body:
            queue.observe_body(declared_size(request), units)
        refused = self.gate.work_refusal(model, units, deadline.remaining())
        if refused is not None:
            self.services.recorder.inc("steadyrank_requests_dropped_total", deployment="ingress", reason="overloaded")
            raise refused
        queue.start(units, time.monotonic())
        self.services.recorder.set("steadyrank_queued_work_units", queue.pending, model=model)
        sent: list[asyncio.Future] = []

        def send() -> Awaitable[Any]:  # the model call runs on if our wait for it is cancelled
            sent.append(asyncio.ensure_future(call()))
            return asyncio.shield(sent[-1])

        def release(completed: bool, answer: Any = None) -> None:
            done = computed(answer) if completed and computed is not None and answer is not None else None
            queue.finish(units, time.monotonic(), completed, done)
            self.services.recorder.set("steadyrank_queued_work_units", queue.pending, model=model)

        try:
            out = await self.call(deadline, send, self.timeout_s(request))
        except DeadlineExceeded:
            if sent and not sent[-1].done():  # the model still has it: its units stay until it is done
                self.detach(settle(sent[-1], release), f"{model} work past its deadline")
            else:
                release(False)
            raise
        except BaseException:
            for work in sent:  # the client went away (or a bug): a job still queued is dropped
                work.cancel()
            release(False)
            raise
        release(True, out)
        return out

    async def model_facts(self, name: str) -> dict[str, Any]:
        """A model deployment's ``info()`` (id, max_length, …), asked once, under a timeout."""
        if name not in self.facts:
            handle = getattr(self.services, name)
            self.facts[name] = await self.call(Deadline.after(SIDE_CALL_TIMEOUT_S), lambda: handle.info.remote())
        return self.facts[name]

    def detach(self, coroutine: Awaitable[Any], what: str) -> None:
        """Run ``coroutine`` on this loop, detached from the request, under :data:`SIDE_CALL_TIMEOUT_S`;
        a failure is logged at DEBUG and dropped. Counted by ``drain`` until done."""

        async def run() -> None:
            try:
                await asyncio.wait_for(coroutine, timeout=SIDE_CALL_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001
                logger.debug("%s dropped: %s", what, type(root_cause(exc)).__name__)

        task = asyncio.get_running_loop().create_task(run())
        self.background.add(task)
        task.add_done_callback(self.background.discard)


async def settle(work: asyncio.Future, release: Callable[[bool, Any], None]) -> None:
    """Await ``work``, a model call whose request already got its 504, then ``release`` its units
    (``True`` and the answer: the model computed them). Run detached (:meth:`Gateway.detach`):
    cancelled after :data:`SIDE_CALL_TIMEOUT_S`, which cancels ``work`` and releases the units all
    the same."""
    try:
        await work
    finally:
        computed = work.done() and not work.cancelled() and work.exception() is None
        release(computed, work.result() if computed else None)


def arrival(request: Request) -> float:
    """When (``time.monotonic()``) the request arrived (:class:`~serve.server.http.middleware.RequestContext`
    notes it; now for a request that passed no such middleware)."""
    return request.scope.get("state", {}).get("arrived", time.monotonic())


def declared_size(request: Request) -> int | None:
    """The request's ``Content-Length`` in bytes, or None when it sends none (or not a number)."""
    declared = request.headers.get("content-length")
    return int(declared) if declared is not None and declared.isdigit() and len(declared) < 20 else None

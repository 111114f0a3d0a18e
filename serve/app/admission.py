"""Work-based admission: refuse a request up front when it cannot finish within its deadline.

A count of requests in flight (``limits.max_in_flight``) says nothing about how long the queue
takes to drain: 32 requests of 100 documents hold a MiniLM cross-encoder on two cores for about
two minutes, so a count limit admits them and most then end in 504 after their deadline. Instead,
each model replica (Reranker, Embedder) keeps a :class:`WorkQueue`: the *units* of work it has
admitted and not yet finished (documents for a reranker, texts for an embedder), from every path
that loads the model (``/v1/rerank``, ``/v1/embeddings``, the searches of ``/v1/search`` and the
shadow replays), and its service rate while busy:

    rate r = units finished / busy seconds        (both sums decay with half-life ``half_life_s``
                                                   of busy time, so the rate follows the load)
    predicted wait of a new request of u units = (pending + u) / r

and admits the request only if the predicted wait is at most ``headroom × deadline``
(:func:`retry_after`). The time until the model first answers is start-up, not service: the sums
start at that first answer, which itself does not count. Until ``min_units`` units have finished no
rate is known and every request is admitted (the count limit and the deadline drops still apply),
and a request that finds nothing pending is always admitted (one oversized request may still run
out of time: 504). A refused request costs no compute: it is answered 503 with ``Retry-After`` =
its predicted wait (the seconds until the work queued now should be done). Busy time runs whenever
units are pending. A unit leaves the queue once, when the model is done with it: computed, dropped
before its forward pass (deadline passed, caller gone) or failed.

The ingress refuses from the same state before it sends anything: in the colocated layout it reads
its own replica's queues; in the split layout it reads what the model replicas publish
(:class:`PublishedQueue`: the sum over replicas of their pending units and rates).

A refusal is cheapest before the request's body is read (a 100-document body is ~50 kB that the
event loop would receive and parse, in the process that computes). For that, the ingress keeps
the body bytes per unit of the last ``SIZE_WINDOW`` requests it saw parsed (:class:`BodySizes`),
and estimates the units of a body of B bytes (its ``Content-Length``) low:

    units_in(B) = max(1, ⌊B / max(bytes per unit of the recent requests)⌋)

exact in the common case of requests shaped like the recent ones (same chunk sizes), and low when
a request's documents are shorter than the longest recent ones. Only a request whose documents are
longer per byte of body than every one of the last ``SIZE_WINDOW`` requests' is estimated high, and
then may be refused before its body is read where its handler would have admitted it; that can
happen only while the queue is nearly full.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

SIZE_WINDOW = 64  # recent requests whose body bytes per unit bound the estimate of units_in


def retry_after(wait: float | None, pending: float, headroom: float, deadline_s: float) -> int | None:
    """None to admit a request whose predicted wait is ``wait`` seconds (None: no rate known yet)
    under ``deadline_s``, with ``pending`` units queued; else the ``Retry-After`` seconds (≥ 1): the
    predicted wait itself, i.e. until the work queued now should be done. (Only the excess over the
    budget ``headroom × deadline_s`` would send every refused client back at once, into the same
    full queue: on a small machine that storm of refusals takes the CPU the model needs.)"""
    if wait is None or wait <= headroom * deadline_s or pending <= 0:  # an idle model always gets to try
        return None
    return max(1, math.ceil(wait))


class QueueView(Protocol):
    """What the ingress reads of a model's admitted work (a :class:`WorkQueue` or a :class:`PublishedQueue`)."""

    @property
    def pending(self) -> float: ...

    def predicted_wait(self, units: int) -> float | None: ...

    def refusal(self, units: int, deadline_s: float) -> int | None: ...


@dataclass
class WorkQueue:
    """One model replica's admitted work (times in seconds of ``time.monotonic``)."""

    headroom: float = 0.8
    half_life_s: float = 10.0
    min_units: int = 32
    pending: int = 0
    done_units: float = 0.0
    busy_s: float = 0.0
    finished_total: int = 0
    _since: float | None = field(default=None, repr=False)
    _answered: bool = field(default=False, repr=False)

    def rate(self) -> float | None:
        """Units finished per busy second, or None until ``min_units`` have finished."""
        if self.finished_total < self.min_units or self.busy_s <= 0:
            return None
        return self.done_units / self.busy_s

    def predicted_wait(self, units: int) -> float | None:
        """Seconds until a new request of ``units`` would be done (None: no rate known yet)."""
        r = self.rate()
        return None if r is None else (self.pending + units) / r

    def refusal(self, units: int, deadline_s: float) -> int | None:
        """None to admit a request of ``units`` under ``deadline_s``; else its ``Retry-After`` (:func:`retry_after`)."""
        return retry_after(self.predicted_wait(units), self.pending, self.headroom, deadline_s)

    def start(self, units: int, now: float) -> None:
        """``units`` admitted."""
        self._advance(now)
        self.pending += units

    def finish(self, units: int, now: float, completed: bool = True) -> None:
        """``units`` are done with; ``completed`` = they were computed (not dropped or failed)."""
        self._advance(now)
        self.pending = max(0, self.pending - units)
        if completed and not self._answered:  # the first answer ends start-up: the sums begin now
            self._answered = True
            self.done_units = self.busy_s = 0.0
        elif completed:
            self.done_units += units
            self.finished_total += units
        if self.pending == 0:
            self._since = None

    def published(self) -> dict[str, float | None]:
        """``{"pending", "rate"}``: what a model replica publishes for the split layout's ingress."""
        return {"pending": float(self.pending), "rate": self.rate()}

    def _advance(self, now: float) -> None:
        """Account the busy seconds since the last event (none while nothing was pending); both
        sums decay by ``0.5 ** (elapsed / half_life_s)`` first."""
        elapsed = max(0.0, now - self._since) if self.pending > 0 and self._since is not None else 0.0
        self._since = now
        if elapsed > 0:
            keep = 0.5 ** (elapsed / self.half_life_s) if self.half_life_s > 0 else 1.0
            self.done_units *= keep
            self.busy_s = self.busy_s * keep + elapsed


@dataclass
class PublishedQueue:
    """A model deployment's admitted work as its replicas publish it (:meth:`WorkQueue.published`),
    for the split layout's ingress: the last state each replica answered within ``stale_s``
    seconds, summed (pending = Σ pendingᵢ, rate = Σ rateᵢ over the replicas with a rate; no rate
    while any replica has none, as a :class:`WorkQueue` admits everything until it knows its rate).
    Times in seconds of ``time.monotonic``."""

    headroom: float = 0.8
    stale_s: float = 5.0
    refresh_s: float = 0.5
    asked: float | None = None
    _states: dict[str, tuple[float, dict[str, float | None]]] = field(default_factory=dict, repr=False)

    def update(self, replica: str, state: dict[str, float | None], now: float) -> None:
        """Replica ``replica`` published ``state`` at ``now``; states older than ``stale_s`` are forgotten."""
        self._states[replica] = (now, state)
        for name, (seen, _) in list(self._states.items()):
            if now - seen > self.stale_s:
                del self._states[name]

    def due(self, now: float) -> bool:
        """Whether to ask the replicas again (every ``refresh_s``); marks the ask."""
        if self.asked is not None and now - self.asked < self.refresh_s:
            return False
        self.asked = now
        return True

    @property
    def pending(self) -> float:
        return sum(float(state["pending"] or 0.0) for _, state in self._states.values())

    def rate(self) -> float | None:
        rates = [state["rate"] for _, state in self._states.values()]
        return None if not rates or any(r is None for r in rates) else sum(float(r or 0.0) for r in rates)

    def predicted_wait(self, units: int) -> float | None:
        r = self.rate()
        return None if r is None or r <= 0 else (self.pending + units) / r

    def refusal(self, units: int, deadline_s: float) -> int | None:
        return retry_after(self.predicted_wait(units), self.pending, self.headroom, deadline_s)


@dataclass
class BodySizes:
    """The body bytes per unit of the last ``SIZE_WINDOW`` parsed requests to one model (module
    docstring), for refusing before a body is read."""

    _bytes_per_unit: deque[float] = field(default_factory=lambda: deque(maxlen=SIZE_WINDOW), repr=False)

    def observe(self, body_bytes: int | None, units: int) -> None:
        """A parsed request of ``units`` had a body of ``body_bytes`` bytes (None: not declared)."""
        if body_bytes is not None and body_bytes > 0 and units > 0:
            self._bytes_per_unit.append(body_bytes / units)

    def units_in(self, body_bytes: int | None) -> int:
        """The low estimate of the units in a body of ``body_bytes`` bytes (module docstring):
        1 when the size is not declared or no request was seen yet."""
        if body_bytes is None or not self._bytes_per_unit:
            return 1
        return max(1, int(body_bytes // max(self._bytes_per_unit)))


@dataclass
class RefusalPacer:
    """Overload answers leave one ingress replica at most ``rate`` per second (0 = no pacing).

    Clients that send their next request as soon as a 503 arrives keep N requests in the air, so
    refusals arrive at N / L per second, L being the time a refusal takes; each costs the replica
    ~1–3 ms of CPU (HTTP parsing, routing, the JSON answer) that the forward passes lose. Pacing
    sets L: refusal i is answered at ``t_i = max(now_i, t_{i-1} + 1 / rate)``, waiting on the event
    loop (no CPU) until then, so the storm costs at most ``rate`` refusals per second whatever N
    is. The wait is capped at ``max_wait_s``, past which a refusal is answered at once (and
    reserves no slot): an open-loop flood then costs what it costs, but never waits unboundedly.
    Clients that honour ``Retry-After`` (the SDKs) come back later anyway and meet no wait.
    """

    rate: float = 0.0
    max_wait_s: float = 5.0
    _next: float = field(default=0.0, repr=False)

    def wait(self, now: float) -> float:
        """Seconds the refusal arriving at ``now`` waits before its 503 is sent (it takes a slot)."""
        if self.rate <= 0:
            return 0.0
        slot = max(now, self._next)
        if slot - now > self.max_wait_s:
            return 0.0
        self._next = slot + 1.0 / self.rate
        return slot - now

"""Work-based admission: refuse a request up front when it cannot finish within its deadline.

A count of requests in flight (``admission.max_in_flight``) says nothing about how long the queue
takes to drain: 32 requests of 100 documents hold a MiniLM cross-encoder on two cores for about
two minutes, so a count limit admits them and most then end in 504 after their deadline. Instead,
each ingress replica keeps, per model deployment, the *units* of work it has admitted and not yet
seen finish (documents for a reranker, texts for an embedder) and the deployment's service rate
while busy:

    rate r = units finished / busy seconds        (both sums decay with half-life ``half_life_s``
                                                   of busy time, so the rate follows the load)
    predicted wait of a new request of u units = (pending + u) / r

and admits the request only if the predicted wait is at most ``headroom × deadline``. The time
until the deployment first answers this replica is start-up, not service (requests sent while the
model replicas still load wait there for tens of seconds): the sums start at that first answer,
which itself does not count. Until ``min_units`` units have finished no rate is known and every
request is admitted (the count
limit and the replicas' deadline drops still apply), and a request that finds nothing pending is
always admitted (one oversized request may still run out of time: 504). A refused request costs
no compute: it is answered 503 with ``Retry-After`` = its predicted wait (the seconds until the work
queued now should be done).
Busy time runs whenever this replica has units pending at the deployment.

A refusal is cheapest before the request's body is read (a 100-document body is ~50 kB that the
event loop would receive and parse, in the process that computes). For that, the queue also keeps
the body bytes per unit of the last ``SIZE_WINDOW`` requests it saw parsed, and estimates the units
of a body of B bytes (its ``Content-Length``) low:

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

SIZE_WINDOW = 64  # recent requests whose body bytes per unit bound the estimate of units_in


@dataclass
class WorkQueue:
    """One model deployment's admitted work as one ingress replica sees it (times in seconds of
    ``time.monotonic``)."""

    headroom: float = 0.8
    half_life_s: float = 10.0
    min_units: int = 32
    pending: int = 0
    done_units: float = 0.0
    busy_s: float = 0.0
    finished_total: int = 0
    _since: float | None = field(default=None, repr=False)
    _answered: bool = field(default=False, repr=False)
    _bytes_per_unit: deque[float] = field(default_factory=lambda: deque(maxlen=SIZE_WINDOW), repr=False)

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
        """None to admit a request of ``units`` under ``deadline_s``; else the ``Retry-After``
        seconds (≥ 1): the predicted wait itself, i.e. until the work queued now should be done.
        (Only the excess over the budget would send every refused client back at once, into the
        same full queue: on a small machine that storm of refusals takes the CPU the model needs.)"""
        wait = self.predicted_wait(units)
        budget = self.headroom * deadline_s
        if wait is None or wait <= budget or self.pending == 0:  # an idle deployment always gets to try
            return None
        return max(1, math.ceil(wait))

    def observe_body(self, body_bytes: int | None, units: int) -> None:
        """A parsed request of ``units`` had a body of ``body_bytes`` bytes (None: not declared)."""
        if body_bytes is not None and body_bytes > 0 and units > 0:
            self._bytes_per_unit.append(body_bytes / units)

    def units_in(self, body_bytes: int | None) -> int:
        """The low estimate of the units in a body of ``body_bytes`` bytes (module docstring):
        1 when the size is not declared or no request was seen yet."""
        if body_bytes is None or not self._bytes_per_unit:
            return 1
        return max(1, int(body_bytes // max(self._bytes_per_unit)))

    def start(self, units: int, now: float) -> None:
        """``units`` admitted and sent to the deployment."""
        self._advance(now)
        self.pending += units

    def finish(self, units: int, now: float, completed: bool = True, computed: int | None = None) -> None:
        """``units`` (as admitted by :meth:`start`) came back; ``completed`` = they were computed
        (not refused or dropped). ``computed``: the units the model actually did, when the request
        told only a low estimate at admission (a search reranks ``k_low`` candidates or, escalated,
        more); the rate counts these."""
        self._advance(now)
        self.pending = max(0, self.pending - units)
        if completed and not self._answered:  # the first answer ends start-up: the sums begin now
            self._answered = True
            self.done_units = self.busy_s = 0.0
        elif completed:
            done = units if computed is None else computed
            self.done_units += done
            self.finished_total += done
        if self.pending == 0:
            self._since = None

    def _advance(self, now: float) -> None:
        """Account the busy seconds since the last event (none while nothing was pending); both
        sums decay by ``0.5 ** (elapsed / half_life_s)`` first."""
        elapsed = max(0.0, now - self._since) if self.pending > 0 and self._since is not None else 0.0
        self._since = now
        if elapsed > 0:
            keep = 0.5 ** (elapsed / self.half_life_s) if self.half_life_s > 0 else 1.0
            self.done_units *= keep
            self.busy_s = self.busy_s * keep + elapsed

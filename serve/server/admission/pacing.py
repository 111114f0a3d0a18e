"""Refusal pacing: overload answers leave one ingress replica at a bounded rate
(``admission.refusals_per_s``; docs/design/0008-admission.md)."""

from __future__ import annotations

from dataclasses import dataclass, field


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

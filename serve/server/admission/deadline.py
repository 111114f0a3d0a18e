"""Deadline drops inside a model replica: a job whose deadline passed, or whose caller gave up, is
dropped before its forward pass (:class:`Ticket`); the components' batcher asks
:meth:`Ticket.drop_reason` when a job is queued and again when its batch starts
(:func:`serve.server.components.common.admitted`, :func:`~serve.server.components.common.run_batch`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Expiring(Protocol):
    """A deadline as a ticket needs it (:class:`serve.server.calls.Deadline` is one)."""

    def expired(self) -> bool: ...


@dataclass
class Ticket:
    """One model call's deadline (None = none) and whether its caller gave up (the handle call was
    cancelled: the client disconnected or the ingress timed out)."""

    deadline: Expiring | None = None
    cancelled: bool = False
    started: bool = False

    def drop_reason(self) -> str | None:
        """``deadline`` (it passed), ``disconnected`` (cancelled before its deadline) or None (run it)."""
        if self.deadline is not None and self.deadline.expired():
            return "deadline"
        return "disconnected" if self.cancelled else None

"""The repeat of a deployment call whose replica died, shared by the ingress' gateway (every call
it makes) and the sharded Retriever (each shard's call).

A call whose replica died under it, or whose replica's node stopped answering (``RayActorError``:
``ActorDiedError``, ``ActorUnavailableError``; or whose answer was lost with that node before it
was read: ``ObjectReconstructionFailedError``, ``OwnerDiedError``, ``ObjectFetchTimedOutError``;
also wrapped in a ``RayTaskError`` raised by a deployment that called it), is made again after
``pause_s`` (0.1 s: Serve's router learns of the loss and routes the repeat to a live or
replacement replica) while the time allows. Only calls that
read (scoring, search, reports) are made through here, so a repeat is safe.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: Seconds between a call lost with its replica and its repeat.
PAUSE_S = 0.1


def replica_lost(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what it wraps) says the replica serving the call died or became
    unreachable, or its answer was lost with its node (see the module docstring)."""
    from ray.exceptions import (
        ObjectFetchTimedOutError,
        ObjectReconstructionFailedError,
        OwnerDiedError,
        RayActorError,
    )

    lost = (RayActorError, ObjectReconstructionFailedError, OwnerDiedError, ObjectFetchTimedOutError)
    seen = 0
    while exc is not None and seen < 6:
        if isinstance(exc, lost):
            return True
        exc = getattr(exc, "cause", None) or exc.__cause__
        seen += 1
    return False


async def again_if_lost(call: Callable[[], Awaitable[T]], ends: float, on_repeat: Callable[[], Any],
                        pause_s: float = PAUSE_S) -> T:
    """Await ``call()`` until it answers or raises something other than a lost replica, repeating
    it (``on_repeat()`` before each repeat) while ``time.monotonic() < ends``; each attempt is given
    the time left, so the whole ends by ``ends`` (``asyncio.TimeoutError`` after). What the last
    attempt raised propagates."""
    while True:
        try:
            return await asyncio.wait_for(call(), timeout=max(0.0, ends - time.monotonic()))
        except Exception as exc:
            if not replica_lost(exc) or time.monotonic() >= ends:
                raise
            on_repeat()
            await asyncio.sleep(min(pause_s, max(0.0, ends - time.monotonic())))

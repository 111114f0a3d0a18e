"""The repeat of a component call whose replica was lost, shared by the ingress' gateway (every call
it makes) and the sharded Retriever (each shard's call).

A call whose replica was lost under it (which failures say so is the host's to tell: ``lost``;
on Ray Serve, :func:`serve.server.hosting.failures.replica_lost`) is made again after ``pause_s``
(0.1 s: the host's router learns of the loss and routes the repeat to a live or replacement
replica) while the time allows. Only calls that read (scoring, search, reports) are made through
here, so a repeat is safe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from steadyrank.serve.server.calls import Deadline

T = TypeVar("T")

#: Seconds between a call lost with its replica and its repeat.
PAUSE_S = 0.1


async def again_if_lost(call: Callable[[], Awaitable[T]], deadline: Deadline, on_repeat: Callable[[], Any],
                        lost: Callable[[BaseException], bool], pause_s: float = PAUSE_S) -> T:
    """Await ``call()`` until it answers or raises something ``lost`` does not call a lost replica,
    repeating it (``on_repeat()`` before each repeat) until ``deadline`` expires; each attempt is
    given the time left, so the whole ends by ``deadline`` (``asyncio.TimeoutError`` after). What the
    last attempt raised propagates."""
    while True:
        try:
            return await asyncio.wait_for(call(), timeout=deadline.remaining())
        except Exception as exc:
            if not lost(exc) or deadline.expired():
                raise
            on_repeat()
            await asyncio.sleep(min(pause_s, deadline.remaining()))

"""User work before shadow work inside one model replica (the Reranker and the Embedder each keep a gate).

The shadow evaluator replays golden queries through the same Reranker replica users hit. On a
CPU-bound replica a replay (one forward pass over 50–100 candidates) would hold the compute thread
for a second or more and every user request arriving meanwhile would wait behind it. The
:class:`ShadowGate` orders the two:

- user work registers itself (``async with gate.user(): ...``) for as long as it is queued or
  running;
- shadow work is split into chunks of a few documents, and each chunk first awaits
  :meth:`ShadowGate.turn`: it starts only once no user work has been active for ``idle_s`` seconds.

A user request arriving while a shadow chunk runs therefore waits for at most the rest of that one
chunk (``chunk_docs`` documents of forward pass), never for a whole replay. So that the evaluator
cannot starve under sustained load, a chunk that has waited ``max_wait_s`` seconds runs anyway.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TypeVar

T = TypeVar("T")


class ShadowGate:
    """Admits shadow work into a replica only while its user work has been idle for ``idle_s`` s.

    Single event loop (a Ray Serve replica's); not thread-safe. ``clock`` returns seconds.
    """

    def __init__(self, idle_s: float, max_wait_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if idle_s < 0 or max_wait_s < 0:
            raise ValueError("idle_s and max_wait_s must be ≥ 0")
        self.idle_s, self.max_wait_s, self.clock = idle_s, max_wait_s, clock
        self.active = 0
        self.last_user_end = float("-inf")
        self._idle = asyncio.Event()
        self._idle.set()

    @asynccontextmanager
    async def user(self) -> AsyncIterator[None]:
        """Mark user work in progress for the duration of the block."""
        self.active += 1
        self._idle.clear()
        try:
            yield
        finally:
            self.active -= 1
            if self.active == 0:
                self.last_user_end = self.clock()
                self._idle.set()

    async def turn(self) -> float:
        """Wait until shadow work may run; returns the seconds waited.

        Returns once no user work is active and none ended in the last ``idle_s`` seconds, or
        after ``max_wait_s`` seconds in any case.
        """
        start = self.clock()
        deadline = start + self.max_wait_s
        while True:
            now = self.clock()
            if now >= deadline:
                break
            if self.active:
                try:
                    await asyncio.wait_for(self._idle.wait(), deadline - now)
                except asyncio.TimeoutError:  # TimeoutError itself from Python 3.11; a timer may fire a tick
                    pass  # early: the loop's own check of the deadline ends the wait, so max_wait_s is exact
                continue
            quiet = now - self.last_user_end
            if quiet >= self.idle_s:
                break
            await asyncio.sleep(min(self.idle_s - quiet, deadline - now))
        return self.clock() - start


def chunks(items: Sequence[T], size: int) -> list[Sequence[T]]:
    """``items`` in consecutive slices of at most ``size`` (size ≥ 1)."""
    if size < 1:
        raise ValueError(f"chunk size must be ≥ 1, got {size}")
    return [items[i : i + size] for i in range(0, len(items), size)]

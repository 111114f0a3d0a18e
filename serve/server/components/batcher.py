"""``RequestBatcher``: dynamic batching across concurrent requests of one model replica.

Jobs wait in one queue; a single loop takes a batch when the model is free: every job queued
while the previous batch computed (at most ``max_batch_size``), after waiting up to
``batch_wait_timeout_s`` for more only when the queue holds fewer than that. So under load a
batch holds what arrived during one forward pass, and concurrency turns into bigger batches.

Ray Serve's ``@serve.batch`` forms the *next* batch while the current one computes (it waits on
its concurrency semaphore only after taking the batch), so with closed-loop clients each of its
batches held ~1 request (8 clients x 16 texts: 1.3 requests per batch) and the model ran one
request at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

logger = logging.getLogger(__name__)


class RequestBatcher:
    """``await batcher(job)`` → that job's entry of ``run(jobs)`` (jobs in arrival order)."""

    def __init__(self, run: Callable[[list[Any]], Awaitable[list[Any]]], max_batch_size: int = 8,
                 batch_wait_timeout_s: float = 0.0) -> None:
        self.run = run
        self.max_batch_size = max_batch_size
        self.batch_wait_timeout_s = batch_wait_timeout_s
        self._queue: deque[tuple[Any, asyncio.Future]] = deque()
        self._ready = asyncio.Event()  # set while the queue holds jobs
        self._worker: asyncio.Task | None = None

    def set_max_batch_size(self, size: int) -> None:
        self.max_batch_size = size

    def set_batch_wait_timeout_s(self, seconds: float) -> None:
        self.batch_wait_timeout_s = seconds

    async def __call__(self, job: Any) -> Any:
        loop = asyncio.get_running_loop()
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._serve())
        future: asyncio.Future = loop.create_future()
        self._queue.append((job, future))
        self._ready.set()
        return await future  # a cancelled caller cancels its future; the batch skips its result

    def _take(self) -> list[tuple[Any, asyncio.Future]]:
        batch = []
        while self._queue and len(batch) < self.max_batch_size:
            job, future = self._queue.popleft()
            if not future.cancelled():
                batch.append((job, future))
        return batch

    async def _serve(self) -> None:
        while True:
            await self._ready.wait()
            if self.batch_wait_timeout_s > 0 and len(self._queue) < self.max_batch_size:
                await asyncio.sleep(self.batch_wait_timeout_s)
            batch = self._take()
            if not self._queue:
                self._ready.clear()
            if batch:
                await self._run(batch)

    async def _run(self, batch: list[tuple[Any, asyncio.Future]]) -> None:
        """``run`` the batch and hand each caller its result; if ``run`` raises, every caller of
        the batch gets the error (callers that gave up meanwhile are skipped)."""
        try:
            results = await self.run([job for job, _ in batch])
        except Exception as exc:  # noqa: BLE001 - delivered to the callers
            logger.exception("batch of %d jobs failed", len(batch))
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)

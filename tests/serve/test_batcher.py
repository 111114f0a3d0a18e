"""RequestBatcher (serve.server.components.batcher): batches across concurrent callers. Pure asyncio;
the "model" is an ``asyncio.sleep`` that records the batches it was given."""

from __future__ import annotations

import asyncio

import pytest

from steadyrank.serve.server.components.batcher import RequestBatcher


class Model:
    def __init__(self, seconds: float = 0.02, fail_on: object = None) -> None:
        self.seconds = seconds
        self.fail_on = fail_on
        self.batches: list[list[object]] = []

    async def run(self, jobs: list[object]) -> list[object]:
        self.batches.append(list(jobs))
        await asyncio.sleep(self.seconds)
        if self.fail_on in jobs:
            raise RuntimeError("boom")
        return [("done", job) for job in jobs]


def test_closed_loop_clients_fill_the_batches() -> None:
    """8 clients that each send their next job as soon as the last one returns: after the first
    batch, every batch holds all 8 (what queued during the previous forward pass)."""
    model = Model()
    batcher = RequestBatcher(model.run, max_batch_size=32)

    async def client(c: int) -> list[object]:
        return [await batcher((c, i)) for i in range(5)]

    async def main() -> list[list[object]]:
        return await asyncio.gather(*(client(c) for c in range(8)))

    answers = asyncio.run(main())
    assert answers == [[("done", (c, i)) for i in range(5)] for c in range(8)]
    sizes = [len(b) for b in model.batches]
    assert sum(sizes) == 40
    assert sizes[1:] == [8] * ((40 - sizes[0]) // 8), sizes


def test_jobs_queued_during_a_batch_form_the_next_one_up_to_the_limit() -> None:
    model = Model(seconds=0.05)
    batcher = RequestBatcher(model.run, max_batch_size=3)

    async def main() -> list[object]:
        first = asyncio.ensure_future(batcher("a"))
        await asyncio.sleep(0.01)  # "a" is computing alone
        rest = [asyncio.ensure_future(batcher(j)) for j in "bcdef"]
        return await asyncio.gather(first, *rest)

    assert asyncio.run(main()) == [("done", j) for j in "abcdef"]
    assert model.batches == [["a"], ["b", "c", "d"], ["e", "f"]]


def test_wait_timeout_lets_a_batch_fill_when_idle() -> None:
    model = Model()
    batcher = RequestBatcher(model.run, max_batch_size=8, batch_wait_timeout_s=0.05)

    async def main() -> None:
        first = asyncio.ensure_future(batcher(1))
        await asyncio.sleep(0.01)
        await asyncio.gather(first, batcher(2))

    asyncio.run(main())
    assert model.batches == [[1, 2]]


def test_a_cancelled_caller_is_left_out_and_a_failing_batch_fails_only_its_callers() -> None:
    model = Model(seconds=0.05, fail_on="bad")
    batcher = RequestBatcher(model.run, max_batch_size=8)

    async def main() -> None:
        first = asyncio.ensure_future(batcher("a"))
        await asyncio.sleep(0.01)
        gone = asyncio.ensure_future(batcher("gone"))
        bad = asyncio.ensure_future(batcher("bad"))
        also = asyncio.ensure_future(batcher("also"))
        await asyncio.sleep(0)
        gone.cancel()
        assert await first == ("done", "a")
        for future in (bad, also):
            with pytest.raises(RuntimeError, match="boom"):
                await future
        assert await batcher("after") == ("done", "after")  # the batcher still serves

    asyncio.run(main())
    assert model.batches == [["a"], ["bad", "also"], ["after"]]

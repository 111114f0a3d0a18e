"""The shadow gate: shadow work runs in the gaps of user work, never ahead of it (no Ray needed).

A single-thread executor stands in for a reranker replica's compute thread, as in
``serve.server.components``; jobs sleep instead of running a forward pass.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from steadyrank.serve.server.admission.shadow import ShadowGate, chunks


def test_chunks() -> None:
    assert chunks(list(range(7)), 3) == [[0, 1, 2], [3, 4, 5], [6]]
    assert chunks([], 4) == []
    with pytest.raises(ValueError, match="chunk size"):
        chunks([1], 0)


def test_gate_rejects_negative_settings() -> None:
    with pytest.raises(ValueError):
        ShadowGate(-1, 1)


def test_shadow_waits_for_user_work_and_idle_time() -> None:
    async def scenario() -> tuple[bool, float, float]:
        gate = ShadowGate(idle_s=0.2, max_wait_s=30)
        release = asyncio.Event()

        async def user() -> None:
            async with gate.user():
                await release.wait()

        user_task = asyncio.create_task(user())
        await asyncio.sleep(0)
        turn = asyncio.create_task(gate.turn())
        await asyncio.sleep(0.3)
        blocked = not turn.done()  # user work still active: no turn, however long
        release.set()
        await user_task
        waited = await turn
        return blocked, waited, time.monotonic() - gate.last_user_end  # the instant the gate counts from

    blocked, waited, after_user = asyncio.run(scenario())
    assert blocked
    assert waited >= 0.49  # 0.3 s behind the user block + 0.2 s of idle time (asyncio may wake a sleep a tick early)
    assert after_user >= 0.2  # measured from the gate's own end of user work, not from a later instant


def test_idle_gate_opens_at_once() -> None:
    async def scenario() -> float:
        return await ShadowGate(idle_s=0.05, max_wait_s=30).turn()

    assert asyncio.run(scenario()) < 0.05


def test_sustained_user_work_cannot_starve_shadow_work() -> None:
    async def scenario() -> float:
        gate = ShadowGate(idle_s=0.01, max_wait_s=0.3)
        release = asyncio.Event()

        async def user() -> None:
            async with gate.user():
                await release.wait()

        task = asyncio.create_task(user())
        await asyncio.sleep(0)
        waited = await gate.turn()
        release.set()
        await task
        return waited

    waited = asyncio.run(scenario())
    assert 0.3 <= waited < 5


def test_user_job_waits_behind_at_most_one_shadow_chunk() -> None:
    """Shadow work of 6 chunks is running when a user job arrives: the user job runs right after the
    current chunk, and the remaining chunks run only after it (and the idle time)."""
    chunk_s, user_s = 0.05, 0.05
    log: list[str] = []

    async def scenario() -> None:
        gate = ShadowGate(idle_s=0.1, max_wait_s=30)
        compute = ThreadPoolExecutor(max_workers=1)
        loop = asyncio.get_running_loop()

        def job(name: str, seconds: float) -> None:
            log.append(f"start {name}")
            time.sleep(seconds)
            log.append(f"end {name}")

        async def shadow() -> None:
            for i in range(6):
                await gate.turn()
                await loop.run_in_executor(compute, job, f"shadow{i}", chunk_s)

        async def user() -> None:
            while "start shadow1" not in log:  # arrive while the second chunk runs
                await asyncio.sleep(0.005)
            async with gate.user():
                await loop.run_in_executor(compute, job, "user", user_s)

        await asyncio.gather(shadow(), user())
        compute.shutdown()

    asyncio.run(scenario())
    starts = [entry.removeprefix("start ") for entry in log if entry.startswith("start")]
    assert starts == ["shadow0", "shadow1", "user", "shadow2", "shadow3", "shadow4", "shadow5"]

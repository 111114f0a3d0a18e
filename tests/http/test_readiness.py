"""``/readyz``'s cache: an answer is served while its checks began at most ``READY_CACHE_S`` ago, so
a slow fan-out does not make its answer live longer (the bound of serve/server/http/routers/health.py).
The clock is a stand-in (no test waits for time to pass); the app, its stand-in components and the
cache are those of tests/http."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from steadyrank.serve.server.http.routers import health

pytestmark = pytest.mark.anyio


async def test_an_answer_ages_from_when_its_checks_began(served, monkeypatch) -> None:
    clock = [100.0]
    monkeypatch.setattr(health, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    calls = served.searcher.behaviour.calls
    served.searcher.behaviour.hold = release = asyncio.Event()
    async with served.client() as c:
        first = asyncio.create_task(c.get("/readyz"))
        for _ in range(3000):  # the fan-out has begun (at most 30 s)
            if calls:
                break
            await asyncio.sleep(0.01)
        clock[0] += 10 * health.READY_CACHE_S  # the fan-out takes long: its answer is old when it arrives
        release.set()
        assert (await first).json()["status"] == "ready"
        clock[0] += health.READY_CACHE_S / 2
        assert (await c.get("/readyz")).json()["status"] == "ready"
        assert len(calls) == 2, "an answer whose checks began long ago was served from the cache"
        assert (await c.get("/readyz")).json()["status"] == "ready"
        assert len(calls) == 2, "a fresh answer was not served from the cache"

"""Issue 36, item 7: ``/metrics`` (open by default) reads the Serve controller's status at most once
per ``REPLICA_STATES_TTL_S``, however many scrapes arrive.

In process: the real ``create_app`` and the real MetricsHub (conftest.py); the controller read (its
``read_states``, on Ray Serve :func:`serve.server.hosting.health.this_app_replica_states`, which
needs a running Serve application) is a stand-in that counts its calls, and the cache's clock is a
stand-in moved by hand (no waiting on time).
"""

from __future__ import annotations

import asyncio

import pytest

from steadyrank.serve.server.components import metrics_hub
from tests.http.conftest import Served

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def controller(served: Served) -> tuple[list[str], Clock]:
    """Counted controller reads and the hub cache's clock."""
    reads: list[str] = []

    def replica_states():
        reads.append("read")
        return {"Reranker": ("HEALTHY", {"RUNNING": len(reads)})}

    served.hub.read_states = replica_states
    clock = Clock()
    served.hub.replica_states.clock = clock
    return reads, clock


async def test_a_scrape_storm_reads_the_controller_once_per_ttl(served: Served, controller) -> None:
    reads, clock = controller
    sample = f'{metrics_hub.REPLICAS_METRIC}{{deployment="Reranker",state="RUNNING"}}'
    async with served.client(None) as c:  # /metrics is open by default
        answers = await asyncio.gather(*(c.get("/metrics") for _ in range(200)))
        assert {r.status_code for r in answers} == {200}
        assert all(f"{sample} 1.0" in r.text for r in answers)
        assert len(reads) == 1  # 200 scrapes, one controller call
        clock.now += metrics_hub.REPLICA_STATES_TTL_S - 0.01
        assert f"{sample} 1.0" in (await c.get("/metrics")).text and len(reads) == 1
        clock.now += 0.02  # the TTL has passed: the next scrape reads again
        assert f"{sample} 2.0" in (await c.get("/metrics")).text and len(reads) == 2


async def test_a_failing_controller_is_not_asked_again_within_the_ttl(served: Served, controller) -> None:
    reads, clock = controller

    def broken():
        reads.append("read")
        raise ConnectionError("controller unreachable")

    served.hub.read_states = broken
    async with served.client(None) as c:
        answers = await asyncio.gather(*(c.get("/metrics") for _ in range(50)))
        assert {r.status_code for r in answers} == {200}  # the counts are missing, the scrape still answers
        assert len(reads) == 1
        clock.now += metrics_hub.REPLICA_STATES_TTL_S
        await c.get("/metrics")
        assert len(reads) == 2

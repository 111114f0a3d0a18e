"""The resource budget of every scoring route and dialect (issue 36): worst-case bodies within and
just beyond the shipped limits, and generated shapes, each sent to the app in process (the
stand-ins of tests/http/conftest.py for the model replicas) while a probe asks ``/healthz``
(tests/budget/harness.py). Every body must be answered

- as JSON, in its dialect's error shape, with the status its limit gives (never a 500);
- within its deadline (``X-Request-Timeout: 2``, plus 3 s for the answer to travel on a loaded box);
- with no ``/healthz`` held up more than 100 ms meanwhile by the process's own work (the probe's
  delay charged in CPU time, which a box busy with other processes does not inflate; the wall-clock
  worst is reported beside it);
- with the process's peak memory growing by at most a small multiple of the body's size.

The table of every measured row is printed at the end of the session (tests/budget/conftest.py)
and pasted into docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from steadyrank.serve.settings import AdmissionSettings, LimitsSettings
from tests.budget.bodies import ROUTES, Route, cases, filling
from tests.budget.conftest import GENERATED
from tests.budget.harness import MIB, Measured, measure
from tests.http.conftest import Served, build

pytestmark = pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc/self/clear_refs")

LIMITS = LimitsSettings()  # the shipped limits
DEADLINE_S = 2.0
ANSWER_SLACK_S = 3.0
HEALTHZ_MS = 100.0
#: peak memory growth allowed: this many times the body, plus a fixed allowance (the answer, the
#: interpreter's own arenas)
MEMORY_PER_BODY = 4.0
MEMORY_BASE_MIB = 24.0

CASES = [(route, case.name) for route in ROUTES for case in cases(route, LIMITS)]


@pytest.fixture(scope="module")
def served() -> Served:
    """The app with the shipped limits, each route asked once (first-use costs are not the body's);
    its embedder stand-in answers vectors of the embedded default's dimension (all-MiniLM-L6-v2: 384),
    so the largest embeddings answers are as long as they get on that server."""
    served = build({"limits": LIMITS.model_dump(), "admission": {**AdmissionSettings().model_dump(), "refusals_per_s": 0}})
    served.embedder.dim = 384

    async def warm() -> None:
        async with served.client() as client:
            for route in ROUTES:
                await client.post(route.path, content=filling(route, b'"a"', 256))

    asyncio.run(warm())
    return served


def check(measured: Measured, route: Route, expect: frozenset[int]) -> None:
    row = measured.row()
    assert measured.content_type.startswith("application/json"), row
    assert measured.status != 500 and (not expect or measured.status in expect), (row, measured.answer)
    if measured.status >= 400:
        answer = measured.answer
        shape = "tei" if isinstance(answer, dict) and "error_type" in answer else "native"
        assert shape in route.shapes, (row, answer)
        message = answer["error"] if shape == "tei" else answer["error"]["message"]
        assert len(message) < 2000, (row, "the error message is not short")
    assert measured.seconds <= DEADLINE_S + ANSWER_SLACK_S, row
    assert measured.stall_ms < HEALTHZ_MS, row
    assert measured.peak_mib <= MEMORY_PER_BODY * measured.size / MIB + MEMORY_BASE_MIB, row


@pytest.mark.parametrize(("route", "name"), CASES, ids=[f"{route.name}: {name}" for route, name in CASES])
def test_every_worst_case_body_is_answered_within_its_budget(served: Served, route: Route, name: str) -> None:
    case = next(c for c in cases(route, LIMITS) if c.name == name)
    body = case.make()
    measured = asyncio.run(measure(served, route.name, route.path, name, body, {"X-Request-Timeout": str(DEADLINE_S)}))
    check(measured, route, case.expect)


JSON_ITEMS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=10)


@pytest.mark.parametrize("route", ROUTES, ids=[route.name for route in ROUTES])
@settings(max_examples=6, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(item=JSON_ITEMS, size=st.sampled_from([64 * 1024, 1 * MIB, LIMITS.max_body_bytes]))
def test_generated_items_repeated_to_fill_a_body_are_answered_within_the_budget(served: Served, route: Route,
                                                                                item: object, size: int) -> None:
    """Any JSON value, repeated as the route's list items until the body is ``size`` bytes."""
    text = json.dumps(item).encode()
    body = filling(route, text, size)
    name = f"{GENERATED}{text[:24].decode(errors='replace')} × {size // len(text)}"
    measured = asyncio.run(measure(served, route.name, route.path, name, body, {"X-Request-Timeout": str(DEADLINE_S)}))
    check(measured, route, frozenset())


OBJECTS = st.dictionaries(st.text(max_size=6), JSON_ITEMS, min_size=1, max_size=8)


@settings(max_examples=8, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(document=OBJECTS, ranked=st.booleans(), size=st.sampled_from([64 * 1024, 1 * MIB, LIMITS.max_body_bytes]))
def test_generated_cohere_objects_rendered_to_yaml_are_answered_within_the_budget(served: Served, document: dict,
                                                                                  ranked: bool, size: int) -> None:
    """Any object document, repeated to fill the body, ranked on all its fields or (``ranked``) on
    its keys as ``rank_fields``: rendered to YAML within the deadline, or refused."""
    route = ROUTES[0]
    text = json.dumps(document).encode()
    extra = {"rank_fields": list(document)} if ranked else {}
    body = filling(route, text, size, **extra)
    name = f"{GENERATED}objects {text[:24].decode(errors='replace')} × {size // len(text)}"
    measured = asyncio.run(measure(served, f"{route.name} objects", route.path, name, body,
                                   {"X-Request-Timeout": str(DEADLINE_S)}))
    check(measured, route, frozenset())

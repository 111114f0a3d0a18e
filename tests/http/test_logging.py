"""Request ids in steadyrank's log lines, JSON log lines, and Ray's quiet start (issue 29, item 7)."""

from __future__ import annotations

import asyncio
import io
import json
import logging

import pytest

from steadyrank.serve.launcher.ray_env import ray_log_level, serve_logging
from steadyrank.serve.server.http.context import configure_logging
from steadyrank.serve.settings import load_settings
from tests.http.conftest import ADMIN_KEY, KEY

pytestmark = pytest.mark.anyio


@pytest.fixture
def json_logs():
    """steadyrank's log lines as JSON, written to a buffer."""
    configure_logging("json", "INFO")
    root = logging.getLogger("steadyrank")
    (handler,) = [h for h in root.handlers if getattr(h, "_steadyrank", False)]
    buffer = io.StringIO()
    handler.setStream(buffer)
    yield buffer
    root.removeHandler(handler)
    root.propagate = True
    root.setLevel(logging.NOTSET)


async def test_json_log_lines_carry_the_request_id(served, json_logs) -> None:
    served.reranker.behaviour.raises = RuntimeError("boom")
    async with served.client() as c:
        r = await c.post("/v1/rerank", json={"query": "q", "documents": ["a"]}, headers={"X-Request-Id": "trace-7"})
    assert r.status_code == 500
    lines = [json.loads(line) for line in json_logs.getvalue().splitlines()]
    errors = [line for line in lines if line["level"] == "ERROR"]
    assert len(errors) == 1 and errors[0]["request_id"] == "trace-7" and "RuntimeError: boom" in errors[0]["exc"]


def test_ray_starts_quiet_unless_the_settings_say_otherwise() -> None:
    quiet = load_settings({}).server
    loud = load_settings({"server": {"log_level": "INFO", "log_format": "json", "access_log": True}}).server
    assert serve_logging(quiet) == {"enable_access_log": False, "log_level": "WARNING", "encoding": "TEXT"}
    assert serve_logging(loud) == {"enable_access_log": True, "log_level": "INFO", "encoding": "JSON"}
    assert ray_log_level(quiet) == logging.WARNING and ray_log_level(loud) == logging.INFO


@pytest.mark.parametrize(("key", "trusted"), [(KEY, False), (ADMIN_KEY, True)])
async def test_only_an_admin_key_marks_a_golden_query_id_as_trusted(served, key, trusted) -> None:
    async with served.client(key) as c:
        r = await c.post("/v1/search", json={"query": "q"}, headers={"X-Golden-Query-Id": "q2"})
    assert r.status_code == 200
    for _ in range(3000):  # the mirror hand-off runs after the response: wait for it (at most 30 s)
        if served.evaluator.events:
            break
        await asyncio.sleep(0.01)
    (event,) = served.evaluator.events
    assert event["golden_query_id"] == "q2" and event["golden_trusted"] is trusted

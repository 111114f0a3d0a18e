"""The schemathesis check ``hostile_json_is_a_json_4xx`` (tests/schemathesis_hooks.py) run by the real
``st`` CLI against the app around the stand-ins of conftest.py on a real uvicorn (no Ray): it passes
on the app as it is, sending its bodies to every route with a JSON body, and it fails on the app
with a bug of the kind issue 31 found (``POST /rerank`` sniffing the body's dialect with a
``json.loads`` whose errors escape: bad UTF-8 and giant numbers become 500s). The same check runs
in the contract fuzz run against the real Ray Serve app (tests/serve/test_dialects.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.http.conftest import KEY, Uvicorn, build

ROOT = Path(__file__).resolve().parents[2]
#: the routes with a JSON body, by their endpoint label
JSON_ENDPOINTS = {"rerank", "rerank_v2", "rerank_tei", "embed_tei", "embeddings", "search"}


def st_run(port: int, tmp_path: Path) -> subprocess.CompletedProcess:
    """The check alone, over every operation, a few generated cases each (seeded)."""
    st = Path(sys.executable).with_name("st")
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks", "PYTHONPATH": str(ROOT),
           "STEADYRANK_HOSTILE_BODY_LIMIT": str(64 * 1024)}
    return subprocess.run(
        [str(st), "run", f"http://127.0.0.1:{port}/openapi.json", "--checks", "hostile_json_is_a_json_4xx",
         "--seed", "20261126", "--max-examples", "2", "--workers", "1", "--phases", "fuzzing",
         "-H", f"Authorization: Bearer {KEY}"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)


def refused_endpoints(served) -> set[str]:
    """Endpoints that answered 413 (every hostile set holds one oversized body per operation)."""
    from prometheus_client.parser import text_string_to_metric_families

    served.services.recorder.flush()
    return {s.labels["endpoint"] for f in text_string_to_metric_families(served.hub.store.render().decode())
            for s in f.samples if s.name == "steadyrank_requests_total" and s.labels.get("code") == "413"}


@pytest.mark.e2e
def test_the_check_sends_every_hostile_body_to_every_json_route_and_passes(tmp_path) -> None:
    served = build()
    with Uvicorn(served.app) as port:
        run = st_run(port, tmp_path)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert JSON_ENDPOINTS <= refused_endpoints(served), refused_endpoints(served)


@pytest.mark.e2e
def test_the_check_fails_on_a_route_that_answers_a_hostile_body_with_a_500(tmp_path, monkeypatch) -> None:
    from steadyrank.serve.server.http.routers import tei

    monkeypatch.setattr(tei, "decode", json.loads)  # parse errors escape
    with Uvicorn(build().app) as port:
        run = st_run(port, tmp_path)
    assert run.returncode != 0
    assert "POST /rerank: hostile bodies not answered with a JSON 4xx: utf8: 500" in run.stdout, run.stdout[-4000:]


@pytest.fixture(autouse=True)
def _quiet_tracebacks(caplog) -> None:
    """The broken app's 500s log their tracebacks at ERROR: expected here."""
    caplog.set_level(100, logger="steadyrank")

"""Issue 36, item 4, in process: one client repeating one golden query cannot take the golden window.

The real ``create_app`` with the stand-in components of conftest.py, and the real shadow evaluator
(``ShadowEvaluator`` around ``QualityService``, its replay loop idle): 200 ``/v1/search`` requests of
one golden query move ``GET /v1/quality``'s window by one query, and a request under another mode
is not counted as a golden evaluation.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from steadyrank.serve.server.hosting.colocated import LocalHandle
from steadyrank.serve.server.quality.evaluator import ShadowEvaluator
from steadyrank.serve.server.quality.golden_sets import GoldenQuery
from steadyrank.serve.server.quality.monitor import evaluate_ranking
from steadyrank.serve.server.quality.service import GoldenProfile
from tests.http.conftest import Served, build

pytestmark = pytest.mark.anyio

#: The stand-in Searcher serves d1 (0.9) then d2 (0.1): the worst order for q1, the best for q2.
GOLDEN = [{"query_id": "q1", "query": "restart a unit", "judgments": {"d1": 1, "d2": 5}},
          {"query_id": "q2", "query": "list open ports", "judgments": {"d1": 5, "d2": 1}}]
SERVED = [("d1", 0.9), ("d2", 0.1)]


async def _served_with_evaluator(tmp_path: Path) -> tuple[Served, Any]:
    path = tmp_path / "golden.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in GOLDEN), encoding="utf-8")
    served = build({"quality": {"golden": str(path), "interval_s": 3600, "canary_fraction": 0.0, "seed": 0}})
    settings = served.services.settings
    evaluator = ShadowEvaluator(
        settings.quality, LocalHandle(served.searcher), served.hub.store, ("primary",),
        GoldenProfile(settings.search.default_mode, settings.search.denoise))
    served.services.evaluator = LocalHandle(evaluator)
    return served, evaluator


async def _settled(evaluator: Any, mirrored: int, skipped: int) -> dict[str, Any]:
    """The evaluator's status once the detached mirror hand-offs are done (a generous cap)."""
    for _ in range(6000):
        status = await evaluator.status()
        if status["mirrored"] >= mirrored and status["mirror_skipped_settings"] >= skipped:
            return status
        await asyncio.sleep(0.01)
    raise AssertionError(f"mirroring did not settle: {status}")


async def test_two_hundred_repeats_of_one_golden_query_move_the_window_by_one_query(tmp_path) -> None:
    served, evaluator = await _served_with_evaluator(tmp_path)
    try:
        async with served.client() as c:
            assert (await c.post("/v1/search", json={"query": "List open ports!"})).status_code == 200
            for _ in range(200):
                assert (await c.post("/v1/search", json={"query": "restart a unit"})).status_code == 200
            r = await c.post("/v1/search", json={"query": "list open ports", "mode": "bm25"})
            assert r.status_code == 200
            await _settled(evaluator, 201, 1)
            quality = (await c.get("/v1/quality")).json()
    finally:
        evaluator._replays.cancel()
    window = quality["windows"]["primary"]
    assert window["n"] == 2
    assert window["composition"] == {"queries": 2, "evaluations": 201, "repeats_refreshed": 199,
                                     "by_source": {"replay": 0, "mirror": 2}, "replayed": 0}
    # q1 (served its worst order 200 times) and q2 (its best, once) weigh alike
    per_query = [evaluate_ranking(GoldenQuery(q["query_id"], q["query"], q["judgments"]), SERVED, variant="primary",
                                  source="mirror").stats["ndcg@10"]["expected"] for q in GOLDEN]
    assert per_query[0] < per_query[1] == 1.0
    assert window["quality"]["ndcg@10"]["expected"] == pytest.approx(sum(per_query) / 2)
    assert quality["mirrored"] == 201 and quality["mirror_skipped_settings"] == 1
    assert quality["evaluation_settings"] == {"mode": "hybrid", "denoise": "off"}  # the served defaults

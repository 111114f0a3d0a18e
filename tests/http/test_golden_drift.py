"""Issue 41, golden drift, in process: off-topic traffic pushes the drift gauge past the alert's threshold.

The real ``create_app`` and the real shadow evaluator (``ShadowEvaluator`` with its drift monitor)
around the stand-in Searcher of conftest.py, whose ``query_vectors`` is the real
``Searcher.query_vectors`` over the real ``Embedder`` component with the bundled all-MiniLM-L6-v2
(the stand-in only replaces retrieval and reranking, which drift does not read). The golden set is
the embedded demo one (Linux administration questions). Traffic like it stays under the
``SteadyrankGoldenSetStale`` threshold (read from deploy/prometheus/rules.yml); cooking and sports
questions cross it, ``/v1/quality`` and ``/metrics`` say so, and the uncovered queries are proposed
only with ``quality.log_queries`` on. A drift round held mid-embedding does not hold user searches.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from steadyrank.serve.server.components.embedder import Embedder
from steadyrank.serve.server.components.searcher import Searcher
from steadyrank.serve.server.hosting.colocated import LocalHandle
from steadyrank.serve.server.quality.evaluator import ShadowEvaluator
from steadyrank.serve.server.quality.golden_sets import DEMO_GOLDEN
from steadyrank.serve.server.quality.service import GoldenProfile
from tests.http.conftest import ADMIN_KEY, FakeSearcher, Served, build, metric

pytestmark = pytest.mark.anyio
RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "rules.yml"

ON_TOPIC = ["how can I restart a service automatically after it fails", "show the journal of a unit since boot",
            "grant a second user write permission on a folder", "extend an LVM volume while mounted",
            "which program listens on port 8080", "open port 443 in firewalld permanently",
            "schedule a nightly job with a systemd timer", "add swap space to a linux server",
            "keep a sysctl setting across reboots", "check the expiry date of a TLS certificate"] * 3
OFF_TOPIC = ["how long do I bake sourdough bread", "best pasta carbonara recipe without cream",
             "who won the football world cup in 2014", "how many calories are in an avocado",
             "marathon training plan for beginners", "how to poach an egg perfectly",
             "rules of the offside in soccer", "vegetarian lasagna with spinach",
             "what wine goes with grilled salmon", "tennis racket string tension for beginners"] * 3


def _stale_threshold() -> float:
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    alert = next(r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "SteadyrankGoldenSetStale")
    return float(re.search(r">\s*([0-9.]+)\s*$", alert["expr"]).group(1))


class EmbeddingSearcher(FakeSearcher):
    """The stand-in Searcher with the real ``query_vectors`` over a real Embedder."""

    query_vectors = Searcher.query_vectors

    def __init__(self, embedder: Any) -> None:
        super().__init__()
        self.embedder = embedder


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    from steadyrank.serve.server.components.metrics_hub import MetricsHub

    return Embedder({}, MetricsHub().store)


async def _served(embedder: Embedder, log_queries: bool) -> tuple[Served, ShadowEvaluator]:
    served = build({"quality": {"golden": str(DEMO_GOLDEN), "interval_s": 3600, "canary_fraction": 0.0, "seed": 0,
                                "log_queries": log_queries,
                                "drift": {"sample_fraction": 1.0, "interval_s": 3600, "min_samples": 20,
                                          "window": 30, "clusters": 6}}})
    served.searcher = EmbeddingSearcher(LocalHandle(embedder))
    served.services.searcher = LocalHandle(served.searcher)
    settings = served.services.settings
    evaluator = ShadowEvaluator(settings.quality, LocalHandle(served.searcher), served.hub.store, ("primary",),
                                GoldenProfile(settings.search.default_mode, settings.search.denoise))
    served.services.evaluator = LocalHandle(evaluator)
    return served, evaluator


async def _search_all(served: Served, evaluator: ShadowEvaluator, queries: list[str]) -> None:
    async with served.client() as c:
        for q in queries:
            assert (await c.post("/v1/search", json={"query": q})).status_code == 200
    assert evaluator.drift is not None
    for _ in range(6000):  # the detached mirror hand-offs, a generous cap
        if evaluator.drift.counts["offered"] >= len(queries):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("mirroring did not settle")


def _gauge(served: Served, evaluator: ShadowEvaluator, name: str, **labels: str) -> float:
    assert evaluator.drift is not None
    evaluator.drift.recorder.flush()  # the evaluator's buffered recorder, into the hub's store
    return metric(served, name, **labels)


def _stop(evaluator: ShadowEvaluator) -> None:
    evaluator._replays.cancel()
    evaluator._drift_rounds.cancel()


async def test_off_topic_traffic_crosses_the_stale_threshold(embedder) -> None:
    threshold = _stale_threshold()
    served, evaluator = await _served(embedder, log_queries=True)
    try:
        await _search_all(served, evaluator, ON_TOPIC)
        on_topic = await evaluator.drift_now()
        assert on_topic["report"]["beyond_share"] < threshold
        assert _gauge(served, evaluator, "steadyrank_golden_drift_window_queries") == 30
        assert _gauge(served, evaluator, "steadyrank_golden_drift_beyond_ratio") < threshold

        await _search_all(served, evaluator, OFF_TOPIC)  # the window of 30 now holds only off-topic queries
        drifted = await evaluator.drift_now()
        async with served.client(ADMIN_KEY) as c:
            quality = (await c.get("/v1/quality")).json()
            proposals = (await c.get("/v1/quality/drift/proposals", params={"n": 5})).json()
        async with served.client() as c:
            assert (await c.get("/v1/quality/drift/proposals")).status_code == 401  # user texts: admin only
    finally:
        _stop(evaluator)
    assert drifted["report"]["beyond_share"] > threshold
    assert _gauge(served, evaluator, "steadyrank_golden_drift_beyond_ratio") == drifted["report"]["beyond_share"]
    assert _gauge(served, evaluator, "steadyrank_golden_drift_topic_share", topic="uncovered", source="live") > threshold
    assert quality["drift"]["report"]["beyond_share"] == drifted["report"]["beyond_share"]
    assert quality["drift"]["golden"]["queries"] == 40 and quality["drift"]["golden"]["clusters"] == 6
    texts = [p["query"] for p in proposals["proposals"]]
    assert 1 <= len(texts) <= 5 and set(texts) <= set(OFF_TOPIC)


async def test_proposals_need_log_queries_and_a_held_round_holds_no_search(embedder) -> None:
    served, evaluator = await _served(embedder, log_queries=False)
    release = asyncio.Event()
    assert evaluator.drift is not None
    embed = evaluator.drift.embed

    async def held(texts: list[str]):
        await release.wait()
        return await embed(texts)

    evaluator.drift.embed = held
    try:
        await _search_all(served, evaluator, OFF_TOPIC[:10])
        round_ = asyncio.get_running_loop().create_task(evaluator.drift_now())
        await _search_all(served, evaluator, OFF_TOPIC[10:20])  # served while the round waits on its embedding
        assert not round_.done()
        release.set()
        status = await round_
        async with served.client(ADMIN_KEY) as c:
            proposals = (await c.get("/v1/quality/drift/proposals")).json()
    finally:
        _stop(evaluator)
    assert status["window"]["n"] >= 10 and status["log_queries"] is False
    assert proposals["proposals"] == [] and "quality.log_queries is off" in proposals["reason"]


async def test_golden_build_from_traffic_writes_a_proposal_file(embedder, tmp_path, capsys) -> None:
    """``steadyrank golden build --from-traffic URL`` against the app on a real uvicorn server: the
    uncovered off-topic queries land in DIR/proposals.jsonl, a queries file ``golden build --queries``
    reads; the golden set is untouched; a second run refuses to overwrite the file under review."""
    from steadyrank.retrieval.corpus import read_queries
    from steadyrank.serve.cli.main import main
    from tests.http.conftest import Uvicorn

    served, evaluator = await _served(embedder, log_queries=True)
    golden_before = DEMO_GOLDEN.read_bytes()
    try:
        await _search_all(served, evaluator, ON_TOPIC[:10] + OFF_TOPIC)
        await evaluator.drift_now()
        with Uvicorn(served.app) as port:
            argv = ["golden", "build", "--from-traffic", f"http://127.0.0.1:{port}", "--out", str(tmp_path),
                    "--proposals", "4", "--api-key", ADMIN_KEY]
            assert await asyncio.to_thread(main, argv) == 0
            printed = capsys.readouterr().out
            assert await asyncio.to_thread(main, argv) == 2  # the file under review is not replaced
    finally:
        _stop(evaluator)
    proposals = read_queries(tmp_path / "proposals.jsonl")
    assert 1 <= len(proposals) <= 4 and set(proposals.values()) <= set(OFF_TOPIC)
    assert "written to" in printed and DEMO_GOLDEN.read_bytes() == golden_before

"""The hygiene stages served (``search.dedup_threshold``, ``search.boost_weight``): the real
``create_app`` and a real Searcher over the stand-in embedder and reranker and a stand-in retriever
(it stands for a FAISS/BM25 index: four passages, the second a near-copy of the first). The response's
``meta.stages_ms`` names the stages that ran, with the same names as the CLI's ``RUN.json``;
``meta.suppressed`` names the demoted near-duplicate."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.pipeline import CandidatePool
from steadyrank.serve.server.hosting.colocated import LocalHandle
from tests.http.conftest import FakeReranker, build

pytestmark = pytest.mark.anyio

TEXTS = {"d1": "dog park rules", "d2": "dog park rules.", "d3": "cats sleep", "d4": "a dog in a park"}


class NearCopyRetriever:
    """d1..d4 in this order; d2's vector is d1's turned by 1° (cosine 0.99985)."""

    async def info(self) -> dict[str, Any]:
        return {"documents": 4}

    async def search(self, query: str, vector: Any, mode: str, depth: int, with_vectors: bool) -> CandidatePool:
        angles = np.radians([0.0, 1.0, 50.0, 100.0])
        vectors = np.zeros((4, 4), np.float32)
        vectors[:, 0], vectors[:, 1] = np.cos(angles), np.sin(angles)
        return CandidatePool(list(TEXTS), np.array([0.9, 0.8, 0.5, 0.1]),
                             [Document(d, t) for d, t in TEXTS.items()], None, None, {},
                             vectors if with_vectors else None)


class StandInReranker(FakeReranker):
    async def fp32_keys(self, query: str, documents: list[str], shadow: bool = False) -> np.ndarray:
        return np.zeros(len(documents), np.float32)


async def _search(search: dict[str, Any]) -> dict[str, Any]:
    from steadyrank.serve.server.components.searcher import Searcher

    served = build({"search": search})
    services = served.services
    services.searcher = LocalHandle(Searcher(services.settings, services.embedder, LocalHandle(NearCopyRetriever()),
                                             LocalHandle(StandInReranker()), None, served.hub.store))
    async with served.client() as client:
        response = await client.post("/v1/search", json={"query": "dog park", "mode": "dense", "top_n": 4,
                                                                "return_candidates": True})
    assert response.status_code == 200, response.text
    return response.json()


async def test_stages_ms_shows_the_hygiene_stages_that_ran() -> None:
    plain = await _search({})
    assert "dedup" not in plain["meta"]["stages_ms"] and "boost" not in plain["meta"]["stages_ms"]
    assert plain["meta"]["suppressed"] == {}

    both = await _search({"dedup_threshold": 0.999, "boost_weight": 0.5})
    meta = both["meta"]
    assert {"retrieve", "dedup", "rerank", "route", "boost", "total"} <= set(meta["stages_ms"])
    assert all(v >= 0 for v in meta["stages_ms"].values())
    assert meta["suppressed"] == {"d2": "d1"}
    assert "d2" not in [c["id"] for c in both["candidates"]]  # not reranked
    assert [r["id"] for r in both["results"]] == ["d1", "d4", "d3"]  # only the kept ones are results


async def test_the_served_boost_is_key_plus_weight_times_overlap() -> None:
    """The stand-in embedder gives every text the same vector, so the stored-vector keys are the
    pool's vectors · that vector; the boost adds 0.5 · overlap (dog, park: d1 1, d3 0, d4 1)."""
    plain = (await _search({}))["candidates"]
    boosted = (await _search({"boost_weight": 0.5}))["candidates"]
    raw = {c["id"]: c["rank_key"] for c in plain}
    overlap = {"d1": 1.0, "d2": 1.0, "d3": 0.0, "d4": 1.0}
    for c in boosted:
        assert c["rank_key"] == pytest.approx(float(np.float32(raw[c["id"]] + 0.5 * overlap[c["id"]])), abs=1e-7)
        assert c["relevance_score"] == pytest.approx(next(p["relevance_score"] for p in plain if p["id"] == c["id"]))
    keys = [c["rank_key"] for c in boosted]
    assert keys == sorted(keys, reverse=True)

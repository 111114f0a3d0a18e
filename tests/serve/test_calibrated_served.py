"""Calibrated scores served (issue 37 item 5): with a reranker's ``score_calibration`` set, every
rerank dialect and ``/v1/search`` answer ``calibrated_score`` = σ(a·key + b) beside an unchanged
``relevance_score``, in the same order as without the calibration; the OpenAPI declares the field;
a calibration fitted on another model is refused at start, or served flagged with
``score_calibration_mismatch: flag``.

The server is the real application in this process (:func:`serve.server.hosting.colocated.colocate`:
real components, index, bundled MiniLM embedder and a tiny random cross-encoder reranker in FP32;
:func:`serve.server.http.create_app` over httpx's ASGI transport); only Ray Serve's processes are
left out. The calibration file is written here (its parameters are arbitrary: the test checks the
map is applied, not that it fits; ``steadyrank calibrate`` is tested in tests/cli)."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from steadyrank.serve.runtime.score_calibration import CalibrationMismatchError, ScoreCalibration, platt_probability

KEY = "calibrated-key"
SLOPE, INTERCEPT = 0.7, 0.3
QUERY = "which metal is liquid at room temperature"
DOCS = [f"document {i}: " + text for i, text in enumerate([
    "mercury is a metal that is liquid at room temperature", "bread rises with yeast", "gallium melts in the hand",
    "the thermometer holds mercury", "iron rusts in water", "liquid water boils at 100 degrees",
    "metals conduct heat", "room temperature is about 20 degrees", "bromine is a liquid element",
    "caesium melts just above room temperature", "lead is a heavy metal", "the sea is salty"])]
REQUESTS = {  # route → body; the results' list, score field and meta path of each dialect
    "v1": ("/v1/rerank", {"query": QUERY, "documents": DOCS}),
    "v2": ("/v2/rerank", {"query": QUERY, "documents": DOCS, "model": None}),
    "tei": ("/rerank", {"query": QUERY, "texts": DOCS}),
    "infinity": ("/rerank", {"query": QUERY, "documents": DOCS}),
}


def _results(dialect: str, body: Any) -> list[dict[str, Any]]:
    return {"v1": lambda: body["results"], "v2": lambda: body["results"], "tei": lambda: body,
            "infinity": lambda: body["data"]}[dialect]()


def _score(dialect: str, item: dict[str, Any]) -> float:
    return item["score"] if dialect == "tei" else item["relevance_score"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("calibrated")
    path = root / "corpus.jsonl"
    path.write_text("".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(DOCS * 3)))
    return path


def _model_id(folder: Path) -> str:
    from steadyrank.serve.runtime import ModelSettings
    from steadyrank.serve.runtime.inspection import inspect_model, model_id

    return model_id(inspect_model(ModelSettings(path=str(folder))))


def _settings(corpus: Path, reranker: Path, calibration: Path | None, mismatch: str = "refuse") -> dict[str, Any]:
    model: dict[str, Any] = {"path": str(reranker), "precision": "fp32"}
    if calibration is not None:
        model |= {"score_calibration": str(calibration), "score_calibration_mismatch": mismatch}
    return {"quality": {"enabled": False}, "cache_dir": str(corpus.parent / "cache"), "index": {"corpus": str(corpus)},
            "auth": {"api_keys": [KEY], "api_keys_env": "STEADYRANK_TEST_CALIBRATED_KEYS"}, "reranker": model,
            "routing": {"route": "fixed50"}}


def _calibration(tmp_path: Path, model_id: str) -> Path:
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(ScoreCalibration(slope=SLOPE, intercept=INTERCEPT, model_id=model_id, precision="fp32",
                                                scoring="hps", threshold=3, golden={"id": "test"}).to_json()))
    return path


async def _answers(settings: dict[str, Any]) -> dict[str, Any]:
    """Every rerank dialect's answer, ``/v1/search`` with its candidates, and the OpenAPI."""
    from steadyrank.serve.server.hosting.colocated import colocate
    from steadyrank.serve.server.http import Services, create_app
    from steadyrank.serve.server.http.dialects.names import ServedNames
    from steadyrank.serve.settings import load_settings
    from steadyrank.serve.telemetry import Recorder

    loaded = load_settings(settings)
    parts = colocate(loaded)
    services = Services(settings=loaded, names=ServedNames.from_settings(loaded),
                        recorder=Recorder(parts.store, flush_interval_s=60), searcher=parts.searcher,
                        embedder=parts.embedder, reranker=parts.reranker, hub=parts.hub)
    out: dict[str, Any] = {}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(services)), base_url="http://test",
                                 headers={"Authorization": f"Bearer {KEY}"}, timeout=120) as client:
        for dialect, (route, body) in REQUESTS.items():
            response = await client.post(route, json={k: v for k, v in body.items() if v is not None})
            assert response.status_code == 200, (dialect, response.text)
            out[dialect] = response.json()
        response = await client.post("/v1/search", json={"query": QUERY, "top_n": 5, "return_candidates": True})
        assert response.status_code == 200, response.text
        out["search"] = response.json()
        out["openapi"] = (await client.get("/openapi.json")).json()
    return out


@pytest.fixture(scope="module")
def served(corpus, tiny_cross_encoder_dir, tmp_path_factory) -> tuple[dict[str, Any], dict[str, Any]]:
    """The answers without and with a calibration of the served model."""
    calibration = _calibration(tmp_path_factory.mktemp("calibration"), _model_id(tiny_cross_encoder_dir))
    plain = asyncio.run(_answers(_settings(corpus, tiny_cross_encoder_dir, None)))
    calibrated = asyncio.run(_answers(_settings(corpus, tiny_cross_encoder_dir, calibration)))
    return plain, calibrated


@pytest.mark.parametrize("dialect", list(REQUESTS))
def test_every_rerank_dialect_answers_calibrated_scores_in_the_same_order(dialect: str, served) -> None:
    plain, calibrated = served
    without, with_ = _results(dialect, plain[dialect]), _results(dialect, calibrated[dialect])
    assert [r["index"] for r in with_] == [r["index"] for r in without]  # ranking unchanged
    assert [_score(dialect, r) for r in with_] == [_score(dialect, r) for r in without]
    assert all("calibrated_score" not in r for r in without)
    probabilities = [r["calibrated_score"] for r in with_]
    assert all(np.diff(probabilities) <= 0)  # ordered as the ranking
    for r in with_:  # a 1-logit head under HPS: relevance_score = σ(key) in FP32, so key = logit(score)
        p = _score(dialect, r)
        key = math.log(p / (1 - p))
        assert r["calibrated_score"] == pytest.approx(1 / (1 + math.exp(-(SLOPE * key + INTERCEPT))), rel=1e-5)
    if dialect == "v1":
        assert calibrated["v1"]["meta"]["calibration"] == {"model": calibrated["v1"]["model"], "golden": "test",
                                                           "threshold": 3, "method": "platt", "model_mismatch": False}
        assert "calibration" not in plain["v1"]["meta"]
    if dialect == "v2":
        assert calibrated["v2"]["meta"]["steadyrank"]["calibration"]["model_mismatch"] is False


def test_search_answers_calibrated_scores_of_the_rank_keys(served) -> None:
    plain, calibrated = served
    without, with_ = plain["search"], calibrated["search"]
    assert [r["id"] for r in with_["results"]] == [r["id"] for r in without["results"]]
    assert [c["id"] for c in with_["candidates"]] == [c["id"] for c in without["candidates"]]
    keys = np.array([c["rank_key"] for c in with_["candidates"]], np.float32)
    expected = platt_probability(keys, SLOPE, INTERCEPT)
    assert [c["calibrated_score"] for c in with_["candidates"]] == expected.tolist()  # float64 of the FP32 key, exact
    by_id = {c["id"]: c["calibrated_score"] for c in with_["candidates"]}
    assert [r["calibrated_score"] for r in with_["results"]] == [by_id[r["id"]] for r in with_["results"]]
    assert with_["meta"]["calibration"]["model_mismatch"] is False
    assert "calibration" not in without["meta"] and "calibrated_score" not in without["results"][0]


def test_the_openapi_declares_calibrated_score(served) -> None:
    schemas = served[1]["openapi"]["components"]["schemas"]
    for name in ("RerankResult", "RerankV2Result", "TeiRank", "InfinityRank", "SearchResult", "Candidate"):
        assert "calibrated_score" in schemas[name]["properties"], name
    assert "calibration" in schemas["RerankMeta"]["properties"] and "calibration" in schemas["SearchMeta"]["properties"]


def test_a_calibration_of_another_model_is_refused_or_served_flagged(corpus, tiny_cross_encoder_dir, tmp_path) -> None:
    other = _calibration(tmp_path, "another/model")
    with pytest.raises(CalibrationMismatchError, match="fitted on model 'another/model'"):
        asyncio.run(_answers(_settings(corpus, tiny_cross_encoder_dir, other)))
    flagged = asyncio.run(_answers(_settings(corpus, tiny_cross_encoder_dir, other, mismatch="flag")))
    assert flagged["v1"]["meta"]["calibration"]["model_mismatch"] is True
    assert flagged["v1"]["meta"]["calibration"]["model"] == "another/model"
    assert flagged["search"]["meta"]["calibration"]["model_mismatch"] is True
    assert "calibrated_score" in flagged["search"]["results"][0]

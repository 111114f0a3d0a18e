"""The colocated layout (``deployments.layout: colocated``, the shipped default) on real Ray Serve.

The application is deployed beside the session's split one (``conftest.serve_app``) from the very
same settings but the layout, on the same index cache, so both serve the same models and index:
one Ray Serve deployment (``Ingress``) holds every component, its answers equal the split
layout's bit for bit, and the in-process shadow evaluator and metrics work as the deployments do.
Unlike the split app (whose overload tests need the replicas' own deadline drops reachable), this
one runs with work-based admission on, at its default ``admission.headroom``.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.serve.conftest import API_KEY, ServeApp, app_beside, app_settings, parse_metrics, wait_until

APP = "colocated"
AUTH = {"Authorization": f"Bearer {API_KEY}"}
QUERY = "how do I find which process listens on a port"
DOCS = ["ss -ltnp lists listening TCP sockets with the owning process",
        "du -sh sums the disk space of a directory", "lsof -i :8080 names the process on port 8080",
        "systemctl restart reloads a unit"]


@pytest.fixture(scope="module")
def colocated(serve_app: ServeApp, tiny_cross_encoder_dir) -> Iterator[httpx.Client]:
    settings = app_settings(serve_app.settings.cache_path(), tiny_cross_encoder_dir)
    settings["deployments"] = {"layout": "colocated"} | {name: {"num_cpus": 0.01} for name in settings["deployments"]
                                                         if name != "layout"}
    settings["deployments"]["reranker"].update(max_ongoing_requests=2, max_batch_size=2)
    del settings["admission"]["headroom"]  # work-based admission on, as users get it
    with app_beside(serve_app, settings, APP, timeout_s=120) as client:
        client.headers.update(AUTH)
        yield client


def test_one_deployment_holds_every_component(colocated: httpx.Client) -> None:
    from ray import serve as ray_serve

    assert set(ray_serve.status().applications[APP].deployments) == {"Ingress"}
    ready = colocated.get("/readyz").json()
    assert ready["status"] == "ready"
    assert {"embedder", "retriever", "reranker", "canary_reranker", "metrics_hub", "evaluator"} <= set(ready["checks"])


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/rerank", {"query": QUERY, "documents": DOCS, "top_n": 3}),
    ("/v1/search", {"query": QUERY, "top_n": 5, "mode": "hybrid"}),
    ("/v1/search", {"query": QUERY, "top_n": 5, "mode": "bm25"}),
    ("/v1/embeddings", {"input": DOCS}),
    ("/v2/rerank", {"model": "rerank-v3.5", "query": QUERY, "documents": DOCS}),
])
def test_answers_equal_the_split_layout(colocated: httpx.Client, client: httpx.Client, path: str, body: dict) -> None:
    ours, theirs = colocated.post(path, json=body), client.post(path, json=body)
    assert ours.status_code == theirs.status_code == 200, (ours.text, theirs.text)
    key = "data" if path == "/v1/embeddings" else "results"
    assert ours.json()[key] == theirs.json()[key]  # ids, order and float scores / vectors, exactly


def test_bad_requests_get_the_same_errors(colocated: httpx.Client, client: httpx.Client) -> None:
    for body in ({"query": "", "documents": DOCS}, {"query": QUERY, "documents": []}, {"query": QUERY}):
        ours, theirs = colocated.post("/v1/rerank", json=body), client.post("/v1/rerank", json=body)
        assert ours.status_code == theirs.status_code
        assert ours.json()["error"].pop("request_id") == ours.headers["x-request-id"]
        assert theirs.json()["error"].pop("request_id") == theirs.headers["x-request-id"]
        assert {**ours.json()["error"], "request_id": None} == {**theirs.json()["error"], "request_id": None}


def test_shadow_evaluator_and_metrics_run_in_the_replica(colocated: httpx.Client) -> None:
    colocated.post("/v1/search", json={"query": QUERY})
    replayed = wait_until(lambda: colocated.get("/v1/quality").json()["replayed"] > 0, 120, 1.0)
    assert replayed, colocated.get("/v1/quality").json()
    assert colocated.get("/v1/quality").json()["failures"] == 0

    def series() -> dict:
        return parse_metrics(colocated.get("/metrics").text)

    def recorded() -> bool:
        m = series()
        return (m.get(("steadyrank_requests_total", (("code", "200"), ("endpoint", "search"), ("model", "pipeline"))), 0) >= 1
                and any(name == "steadyrank_batch_size_count" and ("deployment", "embedder") in labels
                        for name, labels in m)
                and any(name == "steadyrank_stage_duration_seconds_count" and ("stage", "retrieve") in labels
                        for name, labels in m))

    assert wait_until(recorded, 30, 0.5), sorted({name for name, _ in series()})

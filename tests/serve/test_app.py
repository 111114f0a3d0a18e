"""Integration tests against the real Ray Serve application (see ``conftest.py``): every endpoint,
error cases, auth, deadlines, overload, metrics from every replica, the Searcher's contract."""

from __future__ import annotations

import asyncio
import base64
import json

import httpx
import numpy as np
import pytest

from tests.serve.conftest import APP_NAME, ServeApp, wait_until

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

DOCS = [
    "df -h shows the free space of every mounted filesystem",
    "ps aux lists every running process",
    "du -sh summarises how much space a directory uses",
    "ip addr shows the network interfaces and their addresses",
]


def value(metrics: dict, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` carrying ``labels`` (and any others)."""
    return sum(v for (n, ls), v in metrics.items() if n == name and labels.items() <= dict(ls).items())


def assert_error(response: httpx.Response, status: int, error_type: str, *fragments: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"type", "message", "request_id"}, body
    assert body["error"]["request_id"] == response.headers["x-request-id"], body
    assert body["error"]["type"] == error_type, body
    for fragment in fragments:
        assert fragment in body["error"]["message"], body
    return body


# --- health -----------------------------------------------------------------------------------


def test_health_endpoints_are_open(anon_client: httpx.Client, client: httpx.Client) -> None:
    """Open, but an anonymous /readyz tells only its status (the checks need a key)."""
    assert anon_client.get("/healthz").json() == {"status": "ok"}
    assert anon_client.get("/readyz").json() == {"status": "ready", "checks": {}}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    checks = ready.json()["checks"]
    assert ready.json()["status"] == "ready"
    assert checks["embedder"]["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert checks["retriever"]["documents"] == 300
    assert checks["reranker"]["precision"] == "fp32"
    assert checks["canary_reranker"]["precision"] == "bf16"
    metrics = anon_client.get("/metrics")
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    assert "# TYPE steadyrank_requests_total counter" in metrics.text


# --- /v1/rerank -------------------------------------------------------------------------------


def test_rerank_is_cohere_shaped_and_sorted(client: httpx.Client) -> None:
    documents = [DOCS[0], {"text": DOCS[1]}, DOCS[2], DOCS[3]]
    response = client.post("/v1/rerank", json={"query": "how much free disk space is left", "documents": documents,
                                               "top_n": 3, "return_documents": True})
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"id", "model", "results", "meta"}
    assert body["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    results = body["results"]
    assert len(results) == 3
    assert {results[0]["index"], results[1]["index"]} == {0, 2}  # the two disk-space passages first
    assert all(r["document"] == {"text": DOCS[r["index"]]} for r in results)
    scores = [r["relevance_score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    assert all(np.float32(s) == s for s in scores)  # exact float32 values
    assert body["meta"] == {"precision": "fp32", "scoring": "hps", "tie_groups": [], "tie_at_cutoff": False,
                            "rescored_ties": 0, "cutoff_certified": None, "rescored_near_cutoff": 0,
                            "truncated": []}
    # without top_n every document comes back; without return_documents no text
    full = client.post("/v1/rerank", json={"model": "default", "query": "disk space", "documents": DOCS}).json()
    assert sorted(r["index"] for r in full["results"]) == [0, 1, 2, 3]
    assert all("document" not in r for r in full["results"])


def test_rerank_reports_ties_in_input_order(client: httpx.Client) -> None:
    # identical texts score exactly equal: a tie group, ordered by input index, straddling top_n=2
    documents = ["ps aux lists processes", DOCS[0], DOCS[0], DOCS[0]]
    body = client.post("/v1/rerank", json={"query": "free disk space", "documents": documents, "top_n": 2}).json()
    assert [r["index"] for r in body["results"]] == [1, 2]
    assert body["meta"]["tie_groups"] == [[1, 2, 3]]
    assert body["meta"]["tie_at_cutoff"] is True
    assert body["meta"]["rescored_ties"] == 0  # FP32 model: nothing to re-score


def test_rerank_truncation_is_reported(client: httpx.Client) -> None:
    long_doc = " ".join(["filesystem"] * 1200)  # > 512 tokens, < 5000... characters limit is 5000
    long_doc = long_doc[:4900]
    body = client.post("/v1/rerank", json={"query": "filesystem", "documents": [DOCS[0], long_doc]}).json()
    assert body["meta"]["truncated"] == [1]


@pytest.mark.parametrize(
    ("payload", "status", "error_type", "fragment"),
    [
        ({"query": "", "documents": DOCS}, 400, "invalid_request_error", "query"),
        ({"query": "   ", "documents": DOCS}, 400, "invalid_request_error", "query"),
        ({"query": "q", "documents": []}, 400, "invalid_request_error", "documents"),
        ({"documents": DOCS}, 422, "validation_error", "query"),
        ({"query": 3, "documents": DOCS}, 422, "validation_error", "query"),
        ({"query": "q", "documents": "one string"}, 422, "validation_error", "documents"),
        ({"query": "q", "documents": ["a", 5]}, 422, "validation_error", "documents[1]"),
        ({"query": "q", "documents": [["a"]]}, 422, "validation_error", "documents[0]"),
        ({"query": "q", "documents": DOCS, "max_chunks_per_doc": 0}, 422, "validation_error", "max_chunks_per_doc"),
        ({"query": "q", "documents": DOCS, "max_chunks_per_doc": 10_000}, 413, "payload_too_large",
         "max_chunks_per_doc"),
        ({"query": "q", "documents": DOCS, "return_documents": 1}, 422, "validation_error", "return_documents"),
        ({"query": "q", "documents": DOCS, "top_n": 0}, 422, "validation_error", "top_n"),
        ({"query": "q", "documents": DOCS, "top_n": "many"}, 422, "validation_error", "top_n"),
        ({"query": "q", "documents": ["d"] * 301}, 413, "payload_too_large", "documents"),
        ({"query": "q", "documents": ["d", "x" * 5001]}, 413, "payload_too_large", "documents[1]"),
        ({"query": "q" * 501, "documents": DOCS}, 413, "payload_too_large", "query"),
        ({"model": "gpt-4", "query": "q", "documents": DOCS}, 404, "not_found_error", "gpt-4"),
    ],
)
def test_rerank_errors(client: httpx.Client, payload: dict, status: int, error_type: str, fragment: str) -> None:
    assert_error(client.post("/v1/rerank", json=payload), status, error_type, fragment)


def test_malformed_and_oversized_bodies(client: httpx.Client) -> None:
    assert_error(client.post("/v1/rerank", content=b"{not json", headers={"Content-Type": "application/json"}),
                 400, "invalid_request_error", "JSON")
    assert_error(client.post("/v1/rerank", content=b""), 400, "invalid_request_error", "empty")
    assert_error(client.post("/v1/rerank", content=b"[1, 2]"), 422, "validation_error")
    big = {"query": "q", "documents": ["x" * 4000] * 70}  # ≈ 280 KB > 256 KiB
    assert_error(client.post("/v1/rerank", json=big), 413, "payload_too_large", "bytes")

    def chunks():  # no Content-Length: the limit is enforced while reading
        for _ in range(70):
            yield b" " * 4096
    assert_error(client.post("/v1/rerank", content=chunks()), 413, "payload_too_large", "bytes")


def test_unknown_routes_and_methods_are_json(client: httpx.Client) -> None:
    assert_error(client.get("/v1/nope"), 404, "not_found_error")
    assert_error(client.get("/v1/rerank"), 405, "method_not_allowed")


# --- /v1/search -------------------------------------------------------------------------------


def test_search_returns_results_and_routing_facts(client: httpx.Client) -> None:
    response = client.post("/v1/search", json={"query": "how do I make a systemd service restart automatically",
                                               "top_n": 5, "return_candidates": True})
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"id", "results", "meta", "candidates"}
    results, meta, candidates = body["results"], body["meta"], body["candidates"]
    assert len(results) == 5 and all({"id", "relevance_score", "text"} <= set(r) for r in results)
    assert "d001" in [r["id"] for r in results]
    assert meta["k"] in (50, 100) and meta["escalated"] == (meta["k"] == 100)
    assert isinstance(meta["reasons"], list) and meta["mode"] == "hybrid"
    assert {"embed", "retrieve", "rerank", "route", "total"} <= set(meta["stages_ms"])
    assert meta["precision"] == "fp32" and meta["scoring"] == "hps" and meta["variant"] == "primary"
    assert len(candidates) == meta["k"]
    assert [c["id"] for c in candidates[:5]] == [r["id"] for r in results]
    keys = [c["rank_key"] for c in candidates]
    assert keys == sorted(keys, reverse=True)
    assert all(np.float32(c["relevance_score"]) == c["relevance_score"] for c in candidates)
    assert all(isinstance(group, list) and len(group) >= 2 for group in meta["tie_groups"])


def test_search_denoises_the_query_per_request_and_not_by_default(client: httpx.Client, metrics_text) -> None:
    noisy = "Hi there! Sorry to bother you, how do I make a systemd service restart automatically? Thanks 🙏"
    clean = "how do I make a systemd service restart automatically?"
    default = client.post("/v1/search", json={"query": noisy, "top_n": 3}).json()["meta"]
    assert default["query"]["denoise"] == "off" and default["query"]["rewritten"] == noisy
    body = client.post("/v1/search", json={"query": noisy, "top_n": 3, "denoise": "rules"}).json()
    assert body["meta"]["query"] == {"original": noisy, "rewritten": clean, "denoise": "rules", "source": "rules"}
    assert "denoise" in body["meta"]["stages_ms"]
    assert [r["id"] for r in body["results"]] == \
        [r["id"] for r in client.post("/v1/search", json={"query": clean, "top_n": 3, "denoise": "off"}).json()["results"]]
    off = client.post("/v1/search", json={"query": noisy, "top_n": 3, "denoise": "off"}).json()["meta"]
    assert off["query"]["rewritten"] == noisy and "denoise" not in off["stages_ms"]
    # no search.denoise_llm on this server: llm falls back to rules (a schema-valid request is served)
    fallback = client.post("/v1/search", json={"query": noisy, "top_n": 3, "denoise": "llm"})
    assert fallback.status_code == 200 and fallback.json()["meta"]["query"]["rewritten"] == clean
    wait_until(lambda: any(name == "steadyrank_stage_duration_seconds_count" and ("stage", "denoise") in labels
                           for name, labels in metrics_text()), timeout_s=20)


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
def test_search_modes(client: httpx.Client, mode: str) -> None:
    body = client.post("/v1/search", json={"query": "journalctl logs of a unit", "mode": mode, "top_n": 3,
                                           "return_documents": False}).json()
    assert body["meta"]["mode"] == mode and len(body["results"]) == 3
    assert all("text" not in r for r in body["results"]) and "candidates" not in body
    # the primary reranker is the embedder: it reranks from stored vectors, so every mode embeds the query
    assert "embed" in body["meta"]["stages_ms"]


def test_search_without_any_match_is_empty(client: httpx.Client) -> None:
    body = client.post("/v1/search", json={"query": "zzzqqq xxyyzz", "mode": "bm25"}).json()
    assert body["results"] == [] and body["meta"]["k"] == 0


@pytest.mark.parametrize(
    ("payload", "status", "error_type", "fragment"),
    [
        ({"query": ""}, 400, "invalid_request_error", "query"),
        ({"query": "q", "top_n": 101}, 400, "invalid_request_error", "top_n"),
        ({"query": "q", "mode": "fuzzy"}, 422, "validation_error", "mode"),
        ({"query": ["q"]}, 422, "validation_error", "query"),
        ({"query": "q" * 501}, 413, "payload_too_large", "query"),
    ],
)
def test_search_errors(client: httpx.Client, payload: dict, status: int, error_type: str, fragment: str) -> None:
    assert_error(client.post("/v1/search", json=payload), status, error_type, fragment)


# --- /v1/embeddings ---------------------------------------------------------------------------


def test_embeddings_are_openai_shaped(client: httpx.Client) -> None:
    body = client.post("/v1/embeddings", json={"input": ["free disk space", "list processes"], "model": "default"}).json()
    assert body["object"] == "list" and body["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert [d["index"] for d in body["data"]] == [0, 1] and all(d["object"] == "embedding" for d in body["data"])
    vectors = np.array([d["embedding"] for d in body["data"]], dtype=np.float32)
    assert vectors.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert body["usage"]["prompt_tokens"] == body["usage"]["total_tokens"] > 4
    single = client.post("/v1/embeddings", json={"input": "free disk space", "encoding_format": "base64"}).json()
    decoded = np.frombuffer(base64.b64decode(single["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_array_equal(decoded, vectors[0])


@pytest.mark.parametrize(
    ("payload", "status", "error_type", "fragment"),
    [
        ({"input": []}, 400, "invalid_request_error", "input"),
        ({"input": ""}, 400, "invalid_request_error", "input"),
        ({"input": ["a", " "]}, 400, "invalid_request_error", "input[1]"),
        ({"input": [[1, 2, 3]]}, 422, "validation_error", "input"),
        ({"input": "a", "encoding_format": "int8"}, 422, "validation_error", "encoding_format"),
        ({"input": "a", "dimensions": 128}, 400, "invalid_request_error", "dimensions"),
        ({"input": ["a"] * 65}, 413, "payload_too_large", "input"),
        ({"input": "a", "model": "text-embedding-ada-002"}, 404, "not_found_error", "text-embedding-3-small"),
    ],
)
def test_embeddings_errors(client: httpx.Client, payload: dict, status: int, error_type: str, fragment: str) -> None:
    assert_error(client.post("/v1/embeddings", json=payload), status, error_type, fragment)


# --- auth, deadlines, overload ----------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/rerank", "/v1/search", "/v1/embeddings"])
def test_scoring_routes_need_the_api_key(anon_client: httpx.Client, path: str) -> None:
    payload = {"query": "q", "documents": DOCS, "input": "q"}
    missing = assert_error(anon_client.post(path, json=payload), 401, "authentication_error", "missing")
    assert missing
    assert anon_client.post(path, json=payload).headers["www-authenticate"].startswith("Bearer")
    wrong = anon_client.post(path, json=payload, headers={"Authorization": "Bearer nope"})
    assert_error(wrong, 401, "authentication_error", "invalid")
    basic = anon_client.post(path, json=payload, headers={"Authorization": "Basic dXNlcjpwYXNz"})
    assert_error(basic, 401, "authentication_error")
    for open_path in ("/healthz", "/readyz", "/metrics"):
        assert anon_client.get(open_path).status_code == 200
    assert_error(anon_client.get("/v1/canary"), 401, "authentication_error")


def test_deadline_gives_504(client: httpx.Client) -> None:
    response = client.post("/v1/search", json={"query": "restart a service"}, headers={"X-Request-Timeout": "0.001"})
    assert_error(response, 504, "timeout_error", "deadline")
    assert_error(client.post("/v1/search", json={"query": "q"}, headers={"X-Request-Timeout": "soon"}),
                 400, "invalid_request_error", "X-Request-Timeout")


def test_overload_gives_503_with_retry_after(serve_app: ServeApp) -> None:
    """The primary reranker takes 2 ongoing + 2 queued requests per caller; a burst of 24 must
    see some 503s with Retry-After, every other request succeeds, and the server recovers."""
    documents = [f"{DOCS[i % 4]} variant {i}" for i in range(250)]

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=serve_app.url, timeout=120,
                                     headers={"Authorization": f"Bearer {serve_app.api_key}"}) as c:
            return await asyncio.gather(*[
                c.post("/v1/rerank", json={"query": f"disk space {i}", "documents": documents, "top_n": 3})
                for i in range(24)
            ])

    responses = asyncio.run(burst())
    codes = [r.status_code for r in responses]
    assert set(codes) <= {200, 503}, codes
    assert 503 in codes and 200 in codes, codes
    rejected = next(r for r in responses if r.status_code == 503)
    assert rejected.headers["retry-after"] == "2"
    assert_error(rejected, 503, "overloaded_error", "retry")
    with httpx.Client(base_url=serve_app.url, timeout=120,
                      headers={"Authorization": f"Bearer {serve_app.api_key}"}) as c:
        # recovered: a retry (a polite client's, after Retry-After) is served again
        assert wait_until(lambda: c.post("/v1/rerank", json={"query": "q", "documents": DOCS}).status_code == 200,
                          60, step_s=2.0), "still refused a minute after the burst"


def test_bad_requests_never_take_a_replica_down(client: httpx.Client, serve_app: ServeApp) -> None:
    import ray
    from ray import serve as ray_serve

    def replicas() -> set[str]:
        return {a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if "REPLICA" in a["name"]}

    before = replicas()
    assert len(before) >= 8
    for payload in ({"query": "q", "documents": [None]}, {"query": None}, {"query": "q", "documents": ["\x00" * 10]},
                    {"query": "\ud800"}, {"query": "q", "documents": ["a"], "top_n": 10**12}):
        assert client.post("/v1/rerank", content=json.dumps(payload).encode()).status_code < 500
    for path in ("/v1/search", "/v1/embeddings"):
        assert client.post(path, content=b"\xff\xfe garbage").status_code in (400, 422)
    assert client.post("/v1/rerank", json={"query": "q", "documents": DOCS}).status_code == 200
    status = ray_serve.status().applications[APP_NAME]
    assert status.status == "RUNNING"
    for name, deployment in status.deployments.items():
        assert set(deployment.replica_states) == {"RUNNING"}, (name, deployment.replica_states)
    assert replicas() == before  # no replica died and was replaced


# --- metrics ----------------------------------------------------------------------------------


def test_metrics_reach_the_hub_from_every_replica(client: httpx.Client, metrics_text) -> None:
    before = metrics_text()
    client.post("/v1/search", json={"query": "rotate and compress old logs", "top_n": 3}).raise_for_status()
    client.post("/v1/rerank", json={"query": "q", "documents": DOCS}).raise_for_status()
    client.post("/v1/embeddings", json={"input": "q"}).raise_for_status()
    client.post("/v1/rerank", json={"query": "", "documents": DOCS})

    def arrived():  # every replica's share (so none arrives during a later test): the search's stages,
        # candidates reranked by the search and by the rerank, the search's and the embedding's embedder batches
        m = metrics_text()
        searches = value(m, "steadyrank_requests_total", endpoint="search", code="200")
        moved = [value(m, name, **labels) - value(before, name, **labels) >= least for name, labels, least in (
            ("steadyrank_stage_duration_seconds_count", {"stage": "retrieve"}, 1),
            ("steadyrank_candidates_reranked_count", {}, 2),
            ("steadyrank_batch_size_count", {"deployment": "embedder"}, 2))]
        return m if searches > value(before, "steadyrank_requests_total", endpoint="search", code="200") and \
            all(moved) else None

    m = wait_until(arrived, 15.0, 0.25)
    assert m, "search metrics did not reach /metrics"
    # ingress: requests and latency
    assert value(m, "steadyrank_requests_total", endpoint="rerank", code="400") >= 1
    assert value(m, "steadyrank_request_duration_seconds_count", endpoint="embeddings") >= 1
    assert value(m, "steadyrank_request_duration_seconds_bucket", endpoint="rerank", le="10.0") >= 1
    # searcher: stages, K, routing
    for stage in ("embed", "retrieve", "rerank", "route"):
        assert value(m, "steadyrank_stage_duration_seconds_count", stage=stage) >= 1, stage
    assert value(m, "steadyrank_candidates_reranked_count") >= 1
    decisions = value(m, "steadyrank_route_decisions_total", escalated="true") + \
        value(m, "steadyrank_route_decisions_total", escalated="false")
    assert decisions >= 1
    # model replicas: dynamic batch sizes
    assert value(m, "steadyrank_batch_size_count", deployment="reranker") >= 1
    assert value(m, "steadyrank_batch_size_count", deployment="embedder") >= 1
    for name in ("steadyrank_ties_at_cutoff_total", "steadyrank_rescored_ties_total",
                 "steadyrank_tie_group_size_at_cutoff_count"):
        assert (name, ()) in m


# --- the Searcher contract (used by the shadow evaluator) -------------------------------------


USER_SERIES = (("steadyrank_route_decisions_total", (("escalated", "true"),)),
               ("steadyrank_route_decisions_total", (("escalated", "false"),)),
               ("steadyrank_candidates_reranked_count", ()),
               ("steadyrank_batch_size_count", (("deployment", "embedder"),)))


def _user_series(metrics: dict) -> tuple[float, ...]:
    return tuple(metrics.get(key, 0.0) for key in USER_SERIES)


def test_searcher_contract_and_shadow_traffic_is_not_user_traffic(handle, metrics_text) -> None:
    """Shadow searches through the Searcher's handle: the canary's facts and re-scoring, and none of
    the user series moves (route decisions, candidates reranked, the embedder's user batches). Then
    one user search, the sentinel: once its counts arrived (the replicas flush every 0.2 s, so what
    the shadow searches recorded before it has too), each user series moved by exactly one."""
    searcher = handle("Searcher")
    # the earlier tests' series have settled: five reads 0.5 s apart (over ten flushes, 2 s: a replica
    # busy with shadow work may flush late) agree
    reads = [_user_series(metrics_text())]

    def settled() -> bool:
        reads.append(_user_series(metrics_text()))
        return len(reads) >= 5 and len(set(reads[-5:])) == 1

    assert wait_until(settled, 30, step_s=0.5), f"the user series kept moving: {reads[-3:]}"
    before = metrics_text()
    out = searcher.search.remote({"query": "how do I make a systemd service restart automatically",
                                  "top_n": 10, "shadow": True, "variant": "canary"}).result(timeout_s=120).model_dump()
    meta = out["meta"]
    assert meta["variant"] == "canary" and meta["precision"] == "bf16" and meta["shadow"] is True
    candidates = out["candidates"]
    assert len(candidates) == meta["k"] and len(out["results"]) == 10
    assert [c["id"] for c in candidates[:10]] == [r["id"] for r in out["results"]]
    assert all(np.float32(c["relevance_score"]) == c["relevance_score"] for c in candidates)
    # boundary re-scoring (BF16 canary): a tie straddling top_n is re-scored in FP32
    if meta["tie_group_size_at_cutoff"]:
        assert meta["rescored_ties"] == meta["tie_group_size_at_cutoff"]
    primary = searcher.search.remote({"query": "restart a crashed service", "shadow": True}).result(timeout_s=120).model_dump()
    assert primary["meta"]["variant"] == "primary" and len(primary["results"]) == 10
    searcher.search.remote({"query": "restart a crashed service"}).result(timeout_s=120)  # the user sentinel

    def counted() -> dict | None:  # by the Searcher and by the Embedder (each flushes on its own)
        now, then = _user_series(m := metrics_text()), _user_series(before)
        return m if sum(now[:2]) > sum(then[:2]) and now[3] > then[3] else None

    after = wait_until(counted, 60)
    assert after, "the user search's route decision or embedding was not counted"
    moved = [a - b for a, b in zip(_user_series(after), _user_series(before), strict=True)]
    assert sum(moved[:2]) == 1 and moved[2:] == [1, 1], dict(zip(USER_SERIES, moved, strict=True))
    # the shadow searches' query embeddings waited for their turn behind user work, outside the user batches
    waited = ("steadyrank_shadow_wait_seconds_count", (("deployment", "embedder"),))
    assert after.get(waited, 0.0) >= before.get(waited, 0.0) + 2
    # a blank query is the HTTP edge's to refuse (tests/http/test_one_validation_pass.py): the Searcher trusts its calls


def test_quality_endpoints(client: httpx.Client) -> None:
    canary = client.get("/v1/canary")
    assert canary.status_code == 200 and "verdict" in canary.json()
    quality = client.get("/v1/quality")
    assert quality.status_code == 200 and quality.json()["variants"] == ["primary", "canary"]
    models = client.get("/v1/models").json()
    assert {m["task"] for m in models["data"]} == {"embeddings", "rerank"}
    fp32 = {"requested": "fp32", "precision": "fp32", "reason": "set in the settings"}
    assert [m["precision_choice"] for m in models["data"] if "root" not in m] == [fp32, fp32]

"""Every route's shapes, auth, limits and errors, in process (see conftest.py for the stand-ins)."""

from __future__ import annotations

import pytest

from tests.http.conftest import ADMIN_KEY, EMBEDDER_ID, KEY, RERANKER_ID, build, metric

pytestmark = pytest.mark.anyio

DOCS = ["alpha", "beta", "gamma"]

#: (method, path, body) of every route that needs a key
PROTECTED = [
    ("POST", "/v1/rerank", {"query": "q", "documents": DOCS}),
    ("POST", "/v2/rerank", {"query": "q", "documents": DOCS}),
    ("POST", "/rerank", {"query": "q", "texts": DOCS}),
    ("POST", "/rerank", {"query": "q", "documents": DOCS}),
    ("POST", "/embed", {"inputs": "a"}),
    ("POST", "/v1/embeddings", {"input": "a"}),
    ("POST", "/v1/search", {"query": "q"}),
    ("GET", "/v1/models", None),
    ("GET", "/v1/canary", None),
    ("GET", "/v1/quality", None),
]


@pytest.mark.parametrize(("method", "path", "body"), PROTECTED)
async def test_every_protected_route_refuses_a_missing_or_wrong_key_and_accepts_both_kinds_of_key(
        served, method, path, body) -> None:
    for key, status in ((None, 401), ("wrong", 401), (KEY, 200), (ADMIN_KEY, 200)):
        async with served.client(key) as c:
            r = await c.request(method, path, json=body)
        assert r.status_code == status, (key, r.text)
        if status == 401:
            assert r.headers["www-authenticate"].startswith("Bearer")
            assert r.json()["error"]["request_id"] == r.headers["x-request-id"] if path != "/embed" \
                else r.json()["request_id"] == r.headers["x-request-id"]


async def test_a_refused_key_costs_no_model_call(served) -> None:
    async with served.client("wrong") as c:
        await c.post("/v1/rerank", json={"query": "q", "documents": DOCS})
    assert served.reranker.behaviour.calls == []


async def test_no_keys_configured_leaves_every_route_open() -> None:
    served = build({"auth": {"api_keys": [], "admin_keys": []}})
    async with served.client(None) as c:
        assert (await c.post("/v1/rerank", json={"query": "q", "documents": DOCS})).status_code == 200
        assert (await c.get("/readyz")).json()["checks"]  # open server: the details too


async def test_native_rerank_shape_and_request_id(served) -> None:
    async with served.client() as c:
        r = await c.post("/v1/rerank", json={"query": "q", "documents": DOCS, "top_n": 2, "return_documents": True},
                         headers={"X-Request-Id": "client-id-42"})
    assert r.status_code == 200 and r.headers["x-request-id"] == "client-id-42"
    body = r.json()
    assert body["id"] == "client-id-42" and body["model"] == RERANKER_ID
    assert [x["index"] for x in body["results"]] == [0, 1]
    assert body["results"][0]["document"] == {"text": "alpha"}


@pytest.mark.parametrize("sent", ["bad id with spaces", "x" * 129, "ok\nINJECTED", ""])
async def test_an_unsafe_request_id_is_replaced(served, sent) -> None:
    async with served.client() as c:
        r = await c.post("/v1/rerank", json={"query": "q", "documents": DOCS}, headers={"X-Request-Id": sent})
    assert r.headers["x-request-id"] != sent and len(r.headers["x-request-id"]) == 32
    assert r.json()["id"] == r.headers["x-request-id"]


async def test_cohere_v2_infinity_tei_shapes(served) -> None:
    async with served.client() as c:
        v2 = (await c.post("/v2/rerank", json={"query": "q", "documents": DOCS, "top_n": 1})).json()
        inf = (await c.post("/rerank", json={"query": "q", "documents": DOCS, "return_documents": True})).json()
        tei = (await c.post("/rerank", json={"query": "q", "texts": DOCS, "return_text": True})).json()
        emb = (await c.post("/embed", json={"inputs": ["a", "b"]})).json()
        oai = (await c.post("/v1/embeddings", json={"input": ["a b", "c"], "dimensions": 2})).json()
    assert v2["results"] == [{"index": 0, "relevance_score": 1.0}] and v2["meta"]["billed_units"]["search_units"] == 1
    assert inf["object"] == "rerank" and [d["document"] for d in inf["data"]] == DOCS
    assert [t["text"] for t in tei] == DOCS and tei[0]["score"] == 1.0
    assert len(emb) == 2 and len(emb[0]) == 4
    assert oai["model"] == EMBEDDER_ID and len(oai["data"][0]["embedding"]) == 2 and oai["usage"]["prompt_tokens"] == 3


@pytest.mark.parametrize(("path", "body", "status", "native_type", "tei_type"), [
    ("/v1/rerank", {"query": " ", "documents": DOCS}, 400, "invalid_request_error", None),
    ("/v1/rerank", {"query": "q", "documents": []}, 400, "invalid_request_error", None),
    ("/v1/rerank", {"query": "q", "documents": ["x"] * 51}, 413, "payload_too_large", None),
    ("/v1/rerank", {"query": "q", "documents": ["x" * 201]}, 413, "payload_too_large", None),
    ("/v1/rerank", {"query": "q"}, 422, "validation_error", None),
    ("/v1/rerank", {"query": "q", "documents": DOCS, "model": "nope"}, 404, "not_found_error", None),
    ("/v2/rerank", {"query": "q", "documents": DOCS, "extra": 1}, 422, "validation_error", None),
    ("/rerank", {"query": "q", "texts": []}, 400, None, "empty"),
    ("/rerank", {"query": "q", "texts": ["x"] * 51}, 413, None, "validation"),
    ("/rerank", {"query": "q", "texts": DOCS, "raw_scores": True}, 422, None, "validation"),
    ("/embed", {"inputs": ["a"] * 9}, 413, None, "validation"),
    ("/embed", {"inputs": " "}, 400, None, "empty"),
    ("/v1/embeddings", {"input": ["a"], "dimensions": 9}, 400, "invalid_request_error", None),
])
async def test_each_error_kind_has_its_status_and_dialect_shape(served, path, body, status, native_type,
                                                                tei_type) -> None:
    async with served.client() as c:
        r = await c.post(path, json=body)
    assert r.status_code == status, r.text
    rid = r.headers["x-request-id"]
    if tei_type is not None:
        assert r.json() == {"error": r.json()["error"], "error_type": tei_type, "request_id": rid}
    else:
        assert r.json()["error"]["type"] == native_type and r.json()["error"]["request_id"] == rid


async def test_a_tei_text_over_max_length_with_truncate_false_is_413_in_tei_shape(served) -> None:
    async with served.client() as c:
        r = await c.post("/rerank", json={"query": "q", "texts": ["a"] + [" ".join(["w"] * 9)], "truncate": False})
    assert r.status_code == 413 and r.json()["error_type"] == "validation" and "texts[1]" in r.json()["error"]


async def test_a_replica_error_keeps_its_kind_without_string_matching(served) -> None:
    """An over-long input refused by the model runtime (``InputTooLongError``) is 413 whatever its
    message says; a plain ``ValueError`` from a replica is a bug: 500, not the client's fault."""
    from steadyrank.serve.errors import InputTooLongError

    served.reranker.behaviour.raises = InputTooLongError("input 0 has 900 tokens")
    async with served.client() as c:
        assert (await c.post("/v1/rerank", json={"query": "q", "documents": DOCS})).status_code == 413
        served.reranker.behaviour.raises = ValueError("max_length exceeded in some internal place")
        r = await c.post("/v1/rerank", json={"query": "q", "documents": DOCS})
    assert r.status_code == 500 and "max_length" not in r.text


async def test_search_and_models_and_quality(served) -> None:
    async with served.client() as c:
        s = await c.post("/v1/search", json={"query": "q", "return_candidates": True})
        models = (await c.get("/v1/models")).json()
        quality = (await c.get("/v1/quality")).json()
    assert s.status_code == 200 and s.json()["id"] == s.headers["x-request-id"]
    assert [r["id"] for r in s.json()["results"]] == ["d1", "d2"] and len(s.json()["candidates"]) == 2
    assert {m["id"] for m in models["data"]} >= {RERANKER_ID, EMBEDDER_ID, "rr-alias"}
    assert quality == {"mirrored": 1}
    assert served.evaluator.events[0]["request_id"] == s.headers["x-request-id"]


async def test_request_metrics_carry_endpoint_code_and_model(served) -> None:
    async with served.client() as c:
        await c.post("/v1/rerank", json={"query": "q", "documents": DOCS})
        await c.post("/v1/rerank", json={"query": "q", "documents": []})
        await c.post("/v1/embeddings", json={"input": "a"})
    assert metric(served, "steadyrank_requests_total", endpoint="rerank", code="200", model=RERANKER_ID) == 1
    assert metric(served, "steadyrank_requests_total", endpoint="rerank", code="400", model=RERANKER_ID) == 1
    assert metric(served, "steadyrank_request_duration_seconds_count", endpoint="embeddings", model=EMBEDDER_ID) == 1
    assert metric(served, "steadyrank_in_flight_requests") == 0
    assert metric(served, "steadyrank_queued_work_units", model="reranker") == 0


async def test_x_request_timeout_is_checked(served) -> None:
    async with served.client() as c:
        r = await c.post("/v1/rerank", json={"query": "q", "documents": DOCS}, headers={"X-Request-Timeout": "soon"})
    assert r.status_code == 400 and "X-Request-Timeout" in r.json()["error"]["message"]


async def test_a_deadline_passing_is_504(served) -> None:
    import asyncio

    served.reranker.behaviour.hold = asyncio.Event()  # never set: the call outlives its deadline
    async with served.client() as c:
        r = await c.post("/v1/rerank", json={"query": "q", "documents": DOCS}, headers={"X-Request-Timeout": "0.2"})
    assert r.status_code == 504 and r.json()["error"]["type"] == "timeout_error"


async def test_openapi_carries_the_running_limits(served) -> None:
    async with served.client() as c:
        schema = (await c.get("/openapi.json")).json()
    assert "/v1/rerank" in schema["paths"] and "/embed" in schema["paths"]
    assert '"maxItems": 50' in __import__("json").dumps(schema)


async def test_behind_a_server_that_echoes_the_id_the_app_adds_no_second_header() -> None:
    """Ray Serve's HTTP servers put an id in the request's headers and echo it; the app then uses
    that id and leaves the response header to them (a second header would make it a list)."""
    served = build()
    served.services.echoes_request_id = True
    async with served.client() as c:
        r = await c.post("/v1/rerank", json={"query": "q", "documents": DOCS}, headers={"X-Request-Id": "ray-made-id"})
    assert "x-request-id" not in r.headers and r.json()["id"] == "ray-made-id"

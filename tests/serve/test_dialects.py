"""The client dialects against the real Ray Serve app (tests/serve/conftest.py): the real SDKs
(cohere Client and ClientV2, openai, langchain-cohere), TEI and Infinity bodies via httpx, model
aliases, vendor parameters, and a seeded, bounded schemathesis run over every operation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest

DOCS = ["ss -tlnp lists listening TCP sockets with their processes",
        "df -h shows free disk space",
        "lsof -i :8080 shows the process using port 8080"]
QUERY = "how do I see which process listens on a port"


def _v1_order(client: httpx.Client) -> list[tuple[int, float]]:
    response = client.post("/v1/rerank", json={"query": QUERY, "documents": DOCS})
    assert response.status_code == 200, response.text
    return [(r["index"], r["relevance_score"]) for r in response.json()["results"]]


# -- real SDKs ------------------------------------------------------------------------------------


def test_cohere_v1_client_rerank_with_alias_and_rank_fields(serve_app, client) -> None:
    import cohere

    co = cohere.Client(api_key=serve_app.api_key, base_url=serve_app.url)
    result = co.rerank(model="rerank-english-v3.0", query=QUERY, documents=DOCS, top_n=2, return_documents=True)
    expected = _v1_order(client)[:2]
    assert [(r.index, pytest.approx(r.relevance_score)) for r in result.results] == expected
    assert result.results[0].document.text == DOCS[expected[0][0]]
    # rank_fields: objects are ranked on the YAML of the named fields, and returned as sent
    objects = [{"title": "sockets", "body": DOCS[0]}, {"title": "disks", "body": DOCS[1]}]
    ranked = co.rerank(model="rerank-english-v3.0", query=QUERY, documents=objects, rank_fields=["title", "body"],
                       return_documents=True)
    as_text = client.post("/v1/rerank", json={"query": QUERY, "documents": [
        "title: sockets\nbody: " + DOCS[0] + "\n", "title: disks\nbody: " + DOCS[1] + "\n"]}).json()
    assert [(r.index, pytest.approx(r.relevance_score)) for r in ranked.results] == \
        [(r["index"], r["relevance_score"]) for r in as_text["results"]]
    assert ranked.results[0].document.model_dump(exclude_none=True) == objects[ranked.results[0].index]
    # chunked reranking: these short documents are one chunk each, so the ranking is the unchunked one;
    # more chunks per document than chunking.max_chunks_per_doc allows is refused
    chunked = co.rerank(model="rerank-english-v3.0", query=QUERY, documents=DOCS, max_chunks_per_doc=3)
    assert [(r.index, pytest.approx(r.relevance_score)) for r in chunked.results] == _v1_order(client)
    with pytest.raises(cohere.core.api_error.ApiError, match="max_chunks_per_doc") as refused:
        co.rerank(model="rerank-english-v3.0", query=QUERY, documents=DOCS, max_chunks_per_doc=10_000)
    assert refused.value.status_code == 413  # a count over its limit, like every other (limits before work)
    with pytest.raises(cohere.errors.UnauthorizedError):
        cohere.Client(api_key="wrong", base_url=serve_app.url).rerank(model="default", query=QUERY, documents=DOCS)


def test_cohere_v2_client_rerank(serve_app, client) -> None:
    import cohere

    co = cohere.ClientV2(api_key=serve_app.api_key, base_url=serve_app.url)
    result = co.rerank(model="rerank-v3.5", query=QUERY, documents=DOCS, top_n=2)
    assert [(r.index, pytest.approx(r.relevance_score)) for r in result.results] == _v1_order(client)[:2]
    assert result.meta.api_version.version == "2" and result.meta.billed_units.search_units == 1
    facts = result.meta.model_dump()["steadyrank"]
    assert facts["precision"] == "fp32" and facts["scoring"] == "hps" and facts["cut_to_max_tokens"] == []
    # max_tokens_per_doc cuts documents to their first tokens: scores equal those of the cut texts
    cut = co.rerank(model="rerank-v3.5", query=QUERY, documents=DOCS, max_tokens_per_doc=3)
    assert cut.meta.model_dump()["steadyrank"]["cut_to_max_tokens"] == [0, 1, 2]
    prefixes = ["ss -t", "df -", "lsof"]  # the first 3 MiniLM word pieces of each (ss - t, d ##f -, l ##so ##f)
    direct = client.post("/v1/rerank", json={"query": QUERY, "documents": prefixes}).json()["results"]
    assert [(r.index, pytest.approx(r.relevance_score)) for r in cut.results] == \
        [(r["index"], r["relevance_score"]) for r in direct]
    with pytest.raises(cohere.errors.NotFoundError, match="rerank-english-v3.0"):
        co.rerank(model="no-such-model", query=QUERY, documents=DOCS)
    with pytest.raises(cohere.errors.UnauthorizedError):
        cohere.ClientV2(api_key="wrong", base_url=serve_app.url).rerank(model="rerank-v3.5", query=QUERY,
                                                                        documents=DOCS)


def test_langchain_cohere_rerank(serve_app, client) -> None:
    from langchain_cohere import CohereRerank
    from langchain_core.documents import Document

    reranker = CohereRerank(model="rerank-v3.5", base_url=serve_app.url, cohere_api_key=serve_app.api_key, top_n=2)
    kept = reranker.compress_documents([Document(page_content=d) for d in DOCS], QUERY)
    expected = _v1_order(client)[:2]
    assert [d.page_content for d in kept] == [DOCS[i] for i, _ in expected]
    assert [d.metadata["relevance_score"] for d in kept] == pytest.approx([s for _, s in expected])
    import cohere

    with pytest.raises(cohere.errors.UnauthorizedError):
        CohereRerank(model="rerank-v3.5", base_url=serve_app.url, cohere_api_key="wrong").rerank(DOCS, QUERY)


def test_openai_embeddings_alias_dimensions_and_auth(serve_app, client) -> None:
    import openai

    oa = openai.OpenAI(api_key=serve_app.api_key, base_url=f"{serve_app.url}/v1")
    result = oa.embeddings.create(model="text-embedding-3-small", input=["free disk space", "list open ports"])
    direct = client.post("/v1/embeddings", json={"input": ["free disk space", "list open ports"]}).json()
    assert len(result.data) == 2 and result.model == direct["model"]
    assert np.allclose([d.embedding for d in result.data], [d["embedding"] for d in direct["data"]], atol=1e-6)
    with pytest.raises(openai.BadRequestError, match="not declared Matryoshka"):
        oa.embeddings.create(model="text-embedding-3-small", input="x", dimensions=64)
    with pytest.raises(openai.NotFoundError, match="text-embedding-3-small"):
        oa.embeddings.create(model="text-embedding-ada-002", input="x")
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(api_key="wrong", base_url=f"{serve_app.url}/v1").embeddings.create(model="default", input="x")


# -- TEI, Infinity, Jina via httpx ------------------------------------------------------------------


def test_tei_rerank_and_embed(client) -> None:
    expected = _v1_order(client)
    ranks = client.post("/rerank", json={"query": QUERY, "texts": DOCS, "return_text": True})
    assert ranks.status_code == 200, ranks.text
    body = ranks.json()
    assert [(r["index"], pytest.approx(r["score"])) for r in body] == expected
    assert [r["text"] for r in body] == [DOCS[i] for i, _ in expected]
    assert "text" not in client.post("/rerank", json={"query": QUERY, "texts": DOCS}).json()[0]
    refused = client.post("/rerank", json={"query": QUERY, "texts": DOCS, "raw_scores": True})
    assert refused.status_code == 422 and refused.json()["error_type"] == "validation"
    assert "raw_scores" in refused.json()["error"]
    left = client.post("/rerank", json={"query": QUERY, "texts": DOCS, "truncation_direction": "Left"})
    assert left.status_code == 422 and "truncation_direction" in left.json()["error"]
    long_text = "word " * 1000
    assert client.post("/rerank", json={"query": QUERY, "texts": [long_text], "truncate": True}).status_code == 200
    too_long = client.post("/rerank", json={"query": QUERY, "texts": [long_text], "truncate": False})
    assert too_long.status_code == 413 and too_long.json()["error_type"] == "validation"
    max_length = next(m["max_length"] for m in client.get("/v1/models").json()["data"]
                      if m["task"] == "rerank" and "aliases" in m)
    assert too_long.json()["error"] == (f"texts[0] is longer than the model's max_length of {max_length} tokens "
                                        "(send truncate: true to cut it)")
    empty = client.post("/rerank", json={"query": " ", "texts": DOCS})
    assert empty.status_code == 400 and empty.json()["error_type"] == "empty"
    unknown = client.post("/rerank", json={"query": QUERY, "texts": DOCS, "top_k": 1})
    assert unknown.status_code == 422 and "top_k" in unknown.json()["error"]

    vectors = client.post("/embed", json={"inputs": ["free disk space", "list open ports"]})
    assert vectors.status_code == 200, vectors.text
    direct = client.post("/v1/embeddings", json={"input": ["free disk space", "list open ports"]}).json()
    assert np.allclose(vectors.json(), [d["embedding"] for d in direct["data"]], atol=1e-6)
    assert len(client.post("/embed", json={"inputs": "one"}).json()) == 1
    assert client.post("/embed", json={"inputs": long_text, "truncate": False}).status_code == 413
    assert client.post("/embed", json={"inputs": long_text}).status_code == 200
    refused = client.post("/embed", json={"inputs": "x", "normalize": False})
    assert refused.status_code == 422 and "normalize" in refused.json()["error"]


def test_infinity_rerank_body_on_the_tei_path(client) -> None:
    expected = _v1_order(client)
    response = client.post("/rerank", json={"query": QUERY, "documents": DOCS, "top_n": 2, "return_documents": True,
                                            "model": "jina-reranker-v2-base-multilingual"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "rerank" and body["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert [(r["index"], pytest.approx(r["relevance_score"])) for r in body["data"]] == expected[:2]
    assert body["data"][0]["document"] == DOCS[expected[0][0]]
    refused = client.post("/rerank", json={"query": QUERY, "documents": DOCS, "raw_scores": True})
    assert refused.status_code == 422 and "raw_scores" in refused.json()["error"]["message"]
    both = client.post("/rerank", json={"query": QUERY, "documents": DOCS, "texts": DOCS})
    assert both.status_code == 422 and "documents" in both.json()["error"]


def test_jina_embedding_objects(client) -> None:
    objects = client.post("/v1/embeddings", json={"model": "jina-embeddings-v3",
                                                  "input": [{"text": "free disk space"}, "list open ports"]})
    assert objects.status_code == 200, objects.text
    plain = client.post("/v1/embeddings", json={"input": ["free disk space", "list open ports"]}).json()
    assert np.allclose([d["embedding"] for d in objects.json()["data"]], [d["embedding"] for d in plain["data"]])
    bad = client.post("/v1/embeddings", json={"input": [{"txt": "a"}]})
    message = bad.json()["error"]["message"]
    assert bad.status_code == 422 and "[0].JinaText.txt: Extra inputs are not permitted" in message


def test_models_list_aliases_and_unknown_model_lists_them(client) -> None:
    models = client.get("/v1/models").json()["data"]
    ids = [m["id"] for m in models]
    assert "rerank-english-v3.0" in ids and "text-embedding-3-small" in ids
    reranker = next(m for m in models if m["task"] == "rerank" and "aliases" in m)
    assert "jina-reranker-v2-base-multilingual" in reranker["aliases"]
    missing = client.post("/v1/rerank", json={"model": "nope", "query": QUERY, "documents": DOCS})
    assert missing.status_code == 404
    assert "'default'" in missing.json()["error"]["message"] and "'rerank-v3.5'" in missing.json()["error"]["message"]


def test_unknown_route_is_json_404_naming_the_path(client) -> None:
    response = client.post("/v3/rerank", json={})
    assert response.status_code == 404 and response.json()["error"] == {
        "type": "not_found_error", "message": "Not Found: POST /v3/rerank", "request_id": response.headers["x-request-id"]}


def test_openapi_states_the_server_limits(client, serve_app) -> None:
    schema = client.get("/openapi.json").json()
    body = schema["paths"]["/v2/rerank"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    limits = serve_app.settings.limits
    assert body["properties"]["documents"]["maxItems"] == limits.max_documents
    assert body["properties"]["documents"]["minItems"] == 1
    assert body["properties"]["query"]["maxLength"] == limits.max_query_chars
    assert "rerank-v3.5" in body["properties"]["model"]["enum"]
    assert "x-steadyrank-limit" not in str(schema)


# -- the contract, fuzzed ----------------------------------------------------------------------------


def test_schemathesis_every_operation_all_checks(serve_app, tmp_path: Path) -> None:
    """Seeded and bounded: every operation, every check (positive-data acceptance included), and
    the hostile bodies of tests/hostile_inputs.py (nested JSON, bad UTF-8, giant numbers, one over
    the body limit) sent to every JSON operation by the check ``hostile_json_is_a_json_4xx``
    (tests/schemathesis_hooks.py): each must get a JSON 4xx, never a 500."""
    st = Path(sys.executable).with_name("st")
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "STEADYRANK_HOSTILE_BODY_LIMIT": str(serve_app.settings.limits.max_body_bytes)}
    run = subprocess.run(
        [str(st), "--config-file", str(Path(__file__).with_name("schemathesis.toml")), "run",
         f"{serve_app.url}/openapi.json", "--checks", "all", "--seed", "20261123", "--max-examples", "12",
         "--workers", "1", "--phases", "examples,coverage,fuzzing", "--request-timeout", "60",
         "--max-response-time", "60",
         "-H", f"Authorization: Bearer {serve_app.api_key}"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]

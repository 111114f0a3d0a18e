"""Limits before work (issue 36, items 1 and 3), in process around the stand-ins of conftest.py:
a body's JSON values are counted before it is parsed, a list over its limit is refused by the parser
at its first item over (before its items are validated), a schema error lists a few errors and
echoes no input, ``/rerank`` parses its body once, and rendering Cohere objects is bounded by
``limits.max_rank_fields`` and charged to the request's deadline, and every rerank dialect checks
its texts' sizes before it tokenises any (issue 40's one edge step). The costs themselves are measured
by the resource-budget suite (tests/budget)."""

from __future__ import annotations

import json
import time

import pytest
from pydantic import BaseModel

from steadyrank.serve.server.http import schemas
from steadyrank.serve.server.http.dialects import tei
from steadyrank.serve.server.http.dialects.schema_limits import bounded
from steadyrank.serve.settings import load_settings
from tests.http.conftest import build

pytestmark = pytest.mark.anyio


def _counting(monkeypatch, model: type[BaseModel], method: str) -> list[int]:
    """Count calls of ``model.<method>`` on every model derived from it."""
    calls: list[int] = []
    real = getattr(model, method).__func__

    def counted(cls, *args, **kwargs):
        calls.append(1)
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(model, method, classmethod(counted))
    return calls


async def test_a_body_of_too_many_values_is_refused_before_it_is_parsed(monkeypatch) -> None:
    served = build({"limits": {"max_body_values": 200, "max_body_bytes": 64 * 1024}})
    parsed = _counting(monkeypatch, schemas.RerankRequest, "model_validate_json")
    async with served.client() as c:
        over = await c.post("/v1/rerank", content=b'{"query": "q", "documents": [' + b"0," * 200 + b"0]}")
        tei_over = await c.post("/rerank", content=b'{"query": "q", "texts": [' + b"0," * 200 + b"0]}")
        commas = await c.post("/v1/rerank", json={"query": "q", "documents": ["a,[{" * 40] * 3})  # 360 in strings
    # 1 + 2 members + 201 items
    assert over.status_code == 413 and "holds 204 JSON values, more than the limit of 200" in over.json()["error"]["message"]
    assert parsed == [1], "the refused body was parsed"  # the one parse is the commas body's
    assert tei_over.status_code == 413 and tei_over.json()["error"]["type"] == "payload_too_large"  # before the dialect
    assert commas.status_code == 200, "characters inside strings were counted as values"


async def test_a_list_over_its_limit_is_refused_at_its_first_item_over_in_every_dialect(served) -> None:
    """conftest's limits: 50 documents, 8 embedding inputs. The items are invalid: one error (413), not
    one per item."""
    bodies = [("/v1/rerank", {"query": "q", "documents": [0] * 60}, "documents"),
              ("/v2/rerank", {"query": "q", "documents": [0] * 60}, "documents"),
              ("/rerank", {"query": "q", "texts": [0] * 60}, "texts"),
              ("/rerank", {"query": "q", "documents": [0] * 60}, "documents"),
              ("/v1/embeddings", {"input": [{}] * 60}, "input"),
              ("/v1/embeddings", {"input": [0] * 60}, "input"),
              ("/embed", {"inputs": [0] * 60}, "inputs")]
    async with served.client() as c:
        for path, body, field in bodies:
            r = await c.post(path, json=body)
            message = r.json()["error"] if "error_type" in r.json() else r.json()["error"]["message"]
            assert r.status_code == 413, (path, r.text)
            assert message == f"{field} has 60 items, more than the limit of {8 if 'embed' in path else 50}", path


async def test_invalid_items_within_the_limit_are_a_422_naming_ten_and_counting_the_rest(served) -> None:
    async with served.client() as c:
        r = await c.post("/v1/rerank", json={"query": "q", "documents": [0] * 50})
    message = r.json()["error"]["message"]
    assert r.status_code == 422 and message.count("documents[") == 10 and message.endswith("(and 90 more)")


async def test_a_schema_error_echoes_no_input(served) -> None:
    """Not the values, and a key (the client's text) cut to 64 characters."""
    secret, key = "s3cr3t-value-" * 10, "k" * 10_000
    async with served.client() as c:
        r = await c.post("/v2/rerank", json={"query": "q", "documents": ["a"], key: secret, "top_n": secret})
    assert r.status_code == 422 and secret[:13] not in r.text and "k" * 65 not in r.text and "k" * 64 + "…" in r.text


async def test_the_rerank_path_parses_its_body_once(served, monkeypatch) -> None:
    import steadyrank.serve.server.http.scoring as scoring

    decoded = []
    real = scoring.from_json
    monkeypatch.setattr(scoring, "from_json", lambda body: decoded.append(len(body)) or real(body))
    validated = _counting(monkeypatch, tei.TeiRerankRequest, "model_validate_json")
    async with served.client() as c:
        for body in ({"query": "q", "texts": ["a", "b"]}, {"query": "q", "documents": ["a", "b"]}):
            assert (await c.post("/rerank", json=body)).status_code == 200
    assert len(decoded) == 2 and validated == [], "a /rerank body was parsed more than once"


async def test_rank_fields_over_the_limit_are_refused_before_any_document_is_rendered(monkeypatch) -> None:
    import yaml

    served = build({"limits": {"max_rank_fields": 3}})
    rendered = []
    real = yaml.safe_dump
    monkeypatch.setattr(yaml, "safe_dump", lambda *a, **k: rendered.append(1) or real(*a, **k))
    async with served.client() as c:
        over = await c.post("/v1/rerank", json={"query": "q", "documents": [{"a": 1}] * 5,
                                                "rank_fields": ["a", "b", "c", "d"]})
        within = await c.post("/v1/rerank", json={"query": "q", "documents": [{"a": 1}] * 5,
                                                  "rank_fields": ["a", "b", "c"]})
        schema = (await c.get("/openapi.json")).json()
    assert over.status_code == 413 and over.json()["error"]["message"] == "rank_fields has 4 items, more than the limit of 3"
    assert within.status_code == 200 and len(rendered) == 5
    body = schema["paths"]["/v1/rerank"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    rank_fields = body["properties"]["rank_fields"]
    assert json.dumps(rank_fields).count('"maxItems": 3') == 1


async def test_rendering_stops_at_the_first_document_over_the_size_limit(served, monkeypatch) -> None:
    import yaml

    rendered = []
    real = yaml.safe_dump
    monkeypatch.setattr(yaml, "safe_dump", lambda *a, **k: rendered.append(1) or real(*a, **k))
    async with served.client() as c:  # conftest's max_document_chars: 200
        r = await c.post("/v1/rerank", json={"query": "q", "documents": [{"a": 1}, {"a": "x" * 300}] + [{"a": 2}] * 40})
    assert r.status_code == 413 and r.json()["error"]["message"].startswith("documents[1] has ")
    assert len(rendered) == 2, "documents after the one over the limit were rendered"


async def test_rendering_is_charged_to_the_request_deadline(served, monkeypatch) -> None:
    """Each document renders in 50 ms here: 40 of them cannot finish in a 0.5 s deadline, which
    now counts from the request's arrival; the answer is a 504 by then, and the model is never asked."""
    import yaml

    real = yaml.safe_dump
    monkeypatch.setattr(yaml, "safe_dump", lambda *a, **k: time.sleep(0.05) or real(*a, **k))
    async with served.client() as c:
        started = time.monotonic()
        r = await c.post("/v1/rerank", json={"query": "q", "documents": [{"a": i} for i in range(40)]},
                         headers={"X-Request-Timeout": "0.5"})
        took = time.monotonic() - started
    assert r.status_code == 504 and r.json()["error"]["type"] == "timeout_error"
    assert took < 1.5 and served.reranker.behaviour.calls == []


def test_bounded_models_refuse_long_lists_in_every_union_and_keep_their_validators() -> None:
    values = {"max_documents": 2, "max_embedding_inputs": 2, "max_rank_fields": 1}
    embedding = bounded(schemas.EmbeddingRequest, values)
    assert issubclass(embedding, schemas.EmbeddingRequest) and embedding.__name__ == "EmbeddingRequest"
    assert embedding.model_validate({"input": "one string"}).texts() == ["one string"]
    assert embedding.model_validate({"input": [{"text": "a"}, "b"]}).texts() == ["a", "b"]
    for body in ({"input": ["a"] * 3}, {"input": [{"text": "a"}] * 3}):
        errors = _errors(embedding, body)
        assert [e["type"] for e in errors if e["type"] == "too_long"] == ["too_long"]
    assert "token-id" in _errors(embedding, {"input": [1]})[0]["msg"]  # the model's own validator still runs
    rerank = bounded(schemas.RerankRequest, values)
    assert [e["type"] for e in _errors(rerank, {"query": "q", "documents": ["a"], "rank_fields": ["a", "b"]})] == ["too_long"]
    assert bounded(schemas.SearchRequest, values) is schemas.SearchRequest  # no list: the model itself


def _errors(model: type[BaseModel], body: dict) -> list[dict]:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as caught:
        model.model_validate_json(json.dumps(body))
    return caught.value.errors(include_url=False, include_input=False)


def test_max_body_values_must_hold_the_largest_request_the_count_limits_allow() -> None:
    from steadyrank.serve.settings import SettingsError

    with pytest.raises(SettingsError, match="max_body_values"):
        load_settings({"limits": {"max_documents": 30_000}})
    assert load_settings({"limits": {"max_documents": 30_000, "max_body_values": 40_000}}).limits.max_body_values == 40_000


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/rerank", {"query": "q", "documents": ["a", "x" * 201], "max_chunks_per_doc": 4}),
    ("/v2/rerank", {"query": "q", "documents": ["a", "x" * 201], "max_chunks_per_doc": 4, "max_tokens_per_doc": 2}),
    ("/rerank", {"query": "q", "texts": ["a", "x" * 201], "max_chunks_per_doc": 4}),
    ("/rerank", {"query": "q", "documents": ["a", "x" * 201], "max_chunks_per_doc": 4}),
])
async def test_every_rerank_dialect_checks_sizes_before_any_tokenising(served, monkeypatch, path: str,
                                                                        body: dict) -> None:
    """The one edge step (``Scoring.rerank_texts``) runs before chunk planning and ``max_tokens_per_doc``
    cutting, the per-document work that tokenises: a document over ``max_document_chars`` (conftest:
    200) is refused (413) with no text tokenised and no model call."""
    import steadyrank.serve.server.http.scoring as scoring

    tokenised = []
    monkeypatch.setattr(scoring, "plan_chunks", lambda *a, **k: tokenised.append("plan"))
    monkeypatch.setattr(type(served.services.reranker_tokens), "cut", lambda *a, **k: tokenised.append("cut"))
    async with served.client() as c:
        r = await c.post(path, json=body)
    assert r.status_code == 413 and "[1] has 201 characters" in r.text, r.text
    assert tokenised == [] and served.reranker.behaviour.calls == []

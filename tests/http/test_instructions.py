"""Per-request instructions and prompts at the HTTP edge (issue 37, items 2 and 3), in process (the
stand-ins of conftest.py record what they were asked): ``instruction`` on ``/v1/rerank`` and
``/v2/rerank`` reaches the Reranker, ``input_type`` / ``prompt_name`` / ``instruction`` on the
embedding routes reach the Embedder, an instruction over ``limits.max_instruction_chars`` is refused
before any model call, and an unknown field of a native route is named in the answer
(``meta.ignored_fields``, ``X-Ignored-Fields``) instead of vanishing. The served OpenAPI shows the
new fields with the running limit."""

from __future__ import annotations

import pytest

from tests.http.conftest import build

pytestmark = pytest.mark.anyio

DOCS = ["alpha", "beta", "gamma"]
TASK = "Given a code search query, retrieve code snippets that implement it"
LIMIT = 100  # limits.max_instruction_chars of these tests


@pytest.fixture
def served():
    return build({"limits": {"max_instruction_chars": LIMIT}})


async def test_rerank_instructions_reach_the_reranker(served) -> None:
    async with served.client() as c:
        plain = await c.post("/v1/rerank", json={"query": "q", "documents": DOCS})
        v1 = await c.post("/v1/rerank", json={"query": "q", "documents": DOCS, "instruction": TASK})
        v2 = await c.post("/v2/rerank", json={"query": "q", "documents": DOCS, "instruction": TASK})
    assert [r.status_code for r in (plain, v1, v2)] == [200, 200, 200], (v1.text, v2.text)
    assert served.reranker.instructions == [None, TASK, TASK]
    assert "ignored_fields" not in v1.json()["meta"] and "x-ignored-fields" not in v1.headers


@pytest.mark.parametrize("path", ["/v1/rerank", "/v2/rerank"])
@pytest.mark.parametrize(("instruction", "status"), [("x" * (LIMIT + 1), 413), (" \n\t", 400)])
async def test_a_bad_instruction_is_refused_before_any_model_call(served, path, instruction, status) -> None:
    async with served.client() as c:
        r = await c.post(path, json={"query": "q", "documents": DOCS, "instruction": instruction})
    assert r.status_code == status, r.text
    assert "instruction" in r.json()["error"]["message"]
    assert served.reranker.instructions == []


async def test_an_instruction_of_the_largest_allowed_size_is_served(served) -> None:
    async with served.client() as c:
        r = await c.post("/v1/rerank", json={"query": "q", "documents": DOCS, "instruction": "x" * LIMIT})
    assert r.status_code == 200
    assert served.reranker.instructions == ["x" * LIMIT]


async def test_unknown_fields_of_native_routes_are_named_in_the_answer(served) -> None:
    async with served.client() as c:
        rerank = await c.post("/v1/rerank", json={"query": "q", "documents": DOCS, "return_text": True,
                                                  "truncate": False})
        embed = await c.post("/v1/embeddings", json={"input": ["a"], "normalize": True})
        search = await c.post("/v1/search", json={"query": "q", "filter": {"lang": "en"}})
    assert [r.status_code for r in (rerank, embed, search)] == [200, 200, 200]
    assert rerank.json()["meta"]["ignored_fields"] == ["return_text", "truncate"]
    assert rerank.headers["x-ignored-fields"] == "return_text, truncate"
    assert embed.headers["x-ignored-fields"] == "normalize"
    assert search.headers["x-ignored-fields"] == "filter"


async def test_the_ignored_fields_header_stays_ascii_and_small(served) -> None:
    """Hostile names (a comma, a newline, non-Latin-1 text, 40 of them, one very long) cannot split,
    break or bloat the header: each is percent-encoded and cut, at most 32 are listed."""
    extra = {"a,b": 1, "line\nbreak": 2, "名前": 3, "k" * 500: 4, **{f"f{i}": i for i in range(36)}}
    async with served.client() as c:
        r = await c.post("/v1/rerank", json={"query": "q", "documents": DOCS, **extra})
    assert r.status_code == 200
    assert r.json()["meta"]["ignored_fields"] == list(extra)
    header = r.headers["x-ignored-fields"]
    names = header.split(", ")
    assert names[:4] == ["a%2Cb", "line%0Abreak", "%E5%90%8D%E5%89%8D", "k" * 64]
    assert len(names) == 33 and names[-1] == "+8 more"
    assert header.isascii() and len(header) < 1024


async def test_embedding_prompts_reach_the_embedder(served) -> None:
    bodies = [{"input": ["a"]}, {"input": ["a"], "input_type": "search_query"},
              {"input": ["a"], "input_type": "search_document"}, {"input": ["a"], "prompt_name": "classification"},
              {"input": ["a"], "input_type": "search_query", "instruction": TASK}]
    async with served.client() as c:
        answers = [await c.post("/v1/embeddings", json=body) for body in bodies]
        tei = await c.post("/embed", json={"inputs": "a", "prompt_name": "query"})
    assert [r.status_code for r in answers] == [200] * 5 and tei.status_code == 200
    assert served.embedder.prompts == [
        {"role": None, "prompt_name": None, "instruction": None},
        {"role": "query", "prompt_name": None, "instruction": None},
        {"role": "document", "prompt_name": None, "instruction": None},
        {"role": None, "prompt_name": "classification", "instruction": None},
        {"role": "query", "prompt_name": None, "instruction": TASK},
        {"role": None, "prompt_name": "query", "instruction": None},
    ]


async def test_bad_embedding_prompts_are_refused_before_any_model_call(served) -> None:
    async with served.client() as c:
        long = await c.post("/v1/embeddings", json={"input": ["a"], "instruction": "x" * (LIMIT + 1)})
        kind = await c.post("/v1/embeddings", json={"input": ["a"], "input_type": "classification"})
        tei = await c.post("/embed", json={"inputs": "a", "prompt_name": ""})
    assert (long.status_code, kind.status_code, tei.status_code) == (413, 422, 422)
    assert served.embedder.prompts == []


async def test_the_served_openapi_shows_the_new_fields(served) -> None:
    async with served.client() as c:
        schema = (await c.get("/openapi.json")).json()

    def fields(path: str) -> dict:
        return schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["properties"]

    assert fields("/v1/rerank")["instruction"]["anyOf"][0]["maxLength"] == LIMIT
    assert fields("/v2/rerank")["instruction"]["anyOf"][0]["maxLength"] == LIMIT
    assert fields("/v1/embeddings")["instruction"]["anyOf"][0]["maxLength"] == LIMIT
    assert set(fields("/v1/embeddings")) >= {"input_type", "prompt_name"}
    assert "prompt_name" in fields("/embed")
    prompt_names = fields("/v1/embeddings")["prompt_name"]["anyOf"][0]["enum"]
    assert prompt_names == ["classification", "document", "query"]  # the served model's, schema-valid only


@pytest.mark.parametrize(("reranker", "embedder"), [(False, False), (True, False), (False, True), (True, True)])
def test_a_model_that_takes_no_instruction_admits_only_null_in_the_schema(reranker: bool, embedder: bool) -> None:
    """The served OpenAPI states what each model takes: ``maxLength`` 0 under ``minLength`` 1 leaves
    only ``null`` schema-valid for a model with no instruction slot (which refuses one, 400), and
    ``prompt_name`` is one of the embedder's prompt names."""
    from steadyrank.serve.server.http.dialects.names import ServedNames
    from steadyrank.serve.server.http.dialects.schema_limits import contract_values
    from steadyrank.serve.settings.limits import LimitsSettings

    names = ServedNames(reranker=("r",), embedder=("e",), embedder_dim=4, matryoshka=False,
                        embedder_prompt_names=("query",), embedder_instruction=embedder, reranker_instruction=reranker)
    values = contract_values(LimitsSettings(max_instruction_chars=123), names)
    assert values["reranker_instruction_chars"] == (123 if reranker else 0)
    assert values["embedder_instruction_chars"] == (123 if embedder else 0)
    assert values["embedder_prompt_names"] == ["query"]

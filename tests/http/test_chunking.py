"""Chunked reranking at the HTTP edge: every rerank dialect takes ``max_chunks_per_doc``, the
ingress plans the chunks with the reranker's real tokenizer (the bundled MiniLM's) and admits the
request as its chunks; a request that expands into more chunks than the limit is refused before
any model call. The reranker is the stand-in of tests/http/conftest.py (a chunk scores the times it
says ``needle``): the scores of real chunks are tests/serve/test_chunked_rerank.py's."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.http.conftest import build

pytestmark = pytest.mark.anyio

FILLER = "the weather report says rain later in the week and the roads are wet "
# room = 16 input tokens − 3 special − the query's 2 ("find needle"): 11 tokens a chunk
QUERY = "find needle"
LONG = FILLER * 2 + "needle in the haystack " + FILLER
SHORT = "nothing to see here"


def _served(**chunking: object):
    return build({"chunking": {"overlap_tokens": 2, **chunking}, "limits": {"max_document_chars": 2000}})


async def test_v1_rerank_scores_chunks_and_names_the_winning_span() -> None:
    served = _served()
    async with served.client() as client:
        r = await client.post("/v1/rerank", json={"query": QUERY, "documents": [SHORT, LONG], "max_chunks_per_doc": 16})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [x["index"] for x in body["results"]] == [1, 0]  # the long document's needle chunk wins
    facts = {c["index"]: c for c in body["meta"]["chunks"]}
    won = facts[1]
    assert "needle" in LONG[won["start"]:won["end"]].split()
    assert won["chunks_scored"] > 3 and won["chunk"] > 0  # the needle is past the first chunk
    assert facts[0] == {"index": 0, "chunk": 0, "start": 0, "end": len(SHORT), "chunks_scored": 1}
    sent = served.reranker.behaviour.calls[-1][1]
    assert len(sent) == won["chunks_scored"] + 1  # the chunks went to the model, not the documents


async def test_without_the_option_nothing_is_chunked() -> None:
    served = _served()
    async with served.client() as client:
        r = await client.post("/v1/rerank", json={"query": QUERY, "documents": [SHORT, LONG]})
    assert r.status_code == 200, r.text
    assert "chunks" not in r.json()["meta"]
    assert served.reranker.behaviour.calls[-1][1] == [SHORT, LONG]


@pytest.mark.parametrize(("path", "body", "chunk_of"), [
    ("/v2/rerank", {"documents": [SHORT, LONG]}, lambda b: {c["index"]: c for c in b["meta"]["steadyrank"]["chunks"]}),
    ("/rerank", {"documents": [SHORT, LONG]}, lambda b: {d["index"]: d["chunk"] for d in b["data"]}),  # Infinity
    ("/rerank", {"texts": [SHORT, LONG]}, lambda b: {d["index"]: d["chunk"] for d in b}),  # TEI
])
async def test_every_dialect_takes_max_chunks_per_doc(path: str, body: dict, chunk_of) -> None:
    served = _served()
    async with served.client() as client:
        r = await client.post(path, json={"query": QUERY, "max_chunks_per_doc": 16, **body})
    assert r.status_code == 200, r.text
    won = chunk_of(r.json())[1]
    assert "needle" in LONG[won["start"]:won["end"]].split() and won["chunk"] > 0


async def test_more_chunks_than_the_limit_are_refused_before_the_model() -> None:
    served = _served(max_chunks_per_request=5)
    async with served.client() as client:
        r = await client.post("/v1/rerank", json={"query": QUERY, "documents": [SHORT, LONG], "max_chunks_per_doc": 16})
        assert r.status_code == 413, r.text
        assert "max_chunks_per_request" in r.json()["error"]["message"]
        assert served.reranker.behaviour.calls == []  # refused before any model call
        r = await client.post("/v1/rerank", json={"query": QUERY, "documents": [SHORT] * 6, "max_chunks_per_doc": 2})
        assert r.status_code == 413, r.text  # six documents are six chunks at least: refused before tokenising
        r = await client.post("/v1/rerank", json={"query": QUERY, "documents": [SHORT], "max_chunks_per_doc": 17})
        assert r.status_code == 413 and "chunking.max_chunks_per_doc" in r.json()["error"]["message"]
    assert served.reranker.behaviour.calls == []


async def test_admission_counts_chunks_as_work_units() -> None:
    served = _served()
    served.reranker.behaviour.hold = hold = asyncio.Event()
    queue = served.app.state.parts.gate.work["reranker"]
    async with served.client() as client:
        call = asyncio.create_task(client.post("/v1/rerank", json={"query": QUERY, "documents": [SHORT, LONG],
                                                                   "max_chunks_per_doc": 16}))
        async def held() -> None:  # the event: the model holds the request
            while not served.reranker.behaviour.calls:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(held(), 30)
        chunks = len(served.reranker.behaviour.calls[-1][1])
        assert chunks > 2 and queue.pending == chunks  # units admitted = chunks, not documents
        hold.set()
        assert (await call).status_code == 200
    assert queue.pending == 0


async def test_openapi_states_the_chunking_fields() -> None:
    served = _served(max_chunks_per_doc=7)
    async with served.client() as client:
        schema = (await client.get("/openapi.json")).json()
    parts = schema["components"]["schemas"]
    bodies = [schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
              for path in ("/v1/rerank", "/v2/rerank", "/rerank")]
    requests = [*bodies[:2], *bodies[2]["oneOf"]]  # /rerank: TEI's body or Infinity's
    for request in requests:
        field = request["properties"]["max_chunks_per_doc"]
        integer = next(b for b in field["anyOf"] if b.get("type") == "integer")
        assert (integer["minimum"], integer["maximum"]) == (1, 7), request["title"]
    facts = json.dumps(parts["ChunkFacts"])
    assert all(f'"{name}"' in facts for name in ("index", "chunk", "start", "end", "chunks_scored"))
    assert "winning chunk" in json.dumps(parts["TeiRank"]["properties"]["chunk"])
    assert "winning chunk" in json.dumps(parts["InfinityRank"]["properties"]["chunk"])

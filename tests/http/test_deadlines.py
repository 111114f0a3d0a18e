"""The request's deadline reaches the components as one :class:`~serve.server.calls.Deadline`
(issue 40, "Typed calls"): the same instant the ingress answers 504 at, whichever route and
dialect the request came by, and for a search inside the Searcher's call.

In process (tests/http): the stand-in components record the deadline they were given; what a real
replica does with it (drop a job still queued once it passed) is tests/serve/test_calls.py's."""

from __future__ import annotations

import asyncio

import pytest

from steadyrank.serve.server.calls import Deadline, SearchCall
from tests.http.conftest import Served

pytestmark = pytest.mark.anyio

TIMEOUT = {"X-Request-Timeout": "3"}


@pytest.mark.parametrize("path", ["/v1/rerank", "/rerank", "/v2/rerank"])
async def test_a_rerank_gets_the_requests_deadline(served: Served, path: str) -> None:
    body = {"query": "q", "documents": ["alpha", "beta"]} if path != "/rerank" else {"query": "q", "texts": ["a", "b"]}
    if path == "/v2/rerank":
        body["model"] = "fake-reranker"
    async with served.client() as c:
        r = await c.post(path, json=body, headers=TIMEOUT)
    assert r.status_code == 200, r.text
    (deadline,) = served.reranker.deadlines
    assert isinstance(deadline, Deadline) and 0 < deadline.remaining() <= 3.0


async def test_embeddings_and_search_get_the_requests_deadline(served: Served) -> None:
    async with served.client() as c:
        assert (await c.post("/v1/embeddings", json={"input": ["a"]}, headers=TIMEOUT)).status_code == 200
        assert (await c.post("/v1/search", json={"query": "q"}, headers=TIMEOUT)).status_code == 200
    (deadline,) = served.embedder.deadlines
    assert isinstance(deadline, Deadline) and 0 < deadline.remaining() <= 3.0
    (call,), = served.searcher.behaviour.calls
    assert isinstance(call, SearchCall) and isinstance(call.deadline, Deadline)
    assert 0 < call.deadline.remaining() <= 3.0


async def test_the_component_deadline_has_passed_when_the_ingress_answers_504(served: Served) -> None:
    """The reranker holds the request past its 0.2 s: by the 504, the deadline the reranker was
    given has expired too (one instant, not a second clock that could run later)."""
    served.reranker.behaviour.hold = asyncio.Event()
    try:
        async with served.client() as c:
            r = await c.post("/v1/rerank", json={"query": "q", "documents": ["a", "b"]},
                             headers={"X-Request-Timeout": "0.2"})
        assert r.status_code == 504
        (deadline,) = served.reranker.deadlines
        assert deadline is not None and deadline.expired() and deadline.remaining() == 0.0
    finally:
        served.reranker.behaviour.hold.set()

"""One validation pass: every rule of a request is checked once, at the HTTP edge (the real app in
process, stand-in components as in conftest). Each rule function of the edge step
(:mod:`serve.server.http.scoring`) and the served-name lookup is wrapped in a counter, and one request
of every rerank dialect, one search and one embedding request of each dialect is sent: each rule
must run once (a size once per document), however many layers the request passes through. (The
components' side, with a real model: tests/runtime/test_one_validation_pass.py.)"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import steadyrank.serve.server.http.routers.native as native
import steadyrank.serve.server.http.scoring as scoring
from steadyrank.serve.server.http.dialects.names import ServedNames

pytestmark = pytest.mark.anyio

RULES = ("check_query", "check_instruction", "check_not_empty", "check_size", "check_top_n")


def _counted(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """A counter of the edge rules' calls (``resolve reranker``: the served-name lookups)."""
    calls: Counter[str] = Counter()

    def spy(name: str, real: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)
        return counted

    for name in RULES:
        for module in (scoring, native):  # the search route calls its two rules by their imported names
            if hasattr(module, name):
                monkeypatch.setattr(module, name, spy(name, getattr(module, name)))
    real_resolve = ServedNames.resolve

    def resolve(self: ServedNames, kind: Any, model: str | None) -> str:
        calls[f"resolve {kind}"] += 1
        return real_resolve(self, kind, model)

    monkeypatch.setattr(ServedNames, "resolve", resolve)
    return calls


# path, body, the field its texts are in: one request of each rerank dialect, three documents
RERANKS = [
    ("/v1/rerank", {"query": "q", "documents": ["a", "b", "c"], "instruction": "find it"}),
    ("/v1/rerank", {"query": "q", "documents": [{"text": "a"}, "b", {"text": "c"}]}),
    ("/v2/rerank", {"query": "q", "documents": ["a", "b", "c"], "instruction": "find it"}),
    ("/v2/rerank", {"query": "q", "documents": ["a b c", "b", "c"], "max_tokens_per_doc": 2}),
    ("/rerank", {"query": "q", "texts": ["a", "b", "c"]}),  # TEI
    ("/rerank", {"query": "q", "documents": ["a", "b", "c"]}),  # Infinity
]


@pytest.mark.parametrize(("path", "body"), RERANKS, ids=[f"{p} {sorted(b)}" for p, b in RERANKS])
async def test_each_rule_of_a_rerank_request_is_checked_once(served, monkeypatch, path: str, body: dict) -> None:
    calls = _counted(monkeypatch)
    async with served.client() as c:
        r = await c.post(path, json=body)
    assert r.status_code == 200, r.text
    assert calls == {"check_query": 1, "check_instruction": 1, "check_not_empty": 1, "resolve reranker": 1,
                     "check_size": 3}, calls


async def test_each_rule_of_a_search_is_checked_once(served, monkeypatch) -> None:
    calls = _counted(monkeypatch)
    async with served.client() as c:
        r = await c.post("/v1/search", json={"query": "q", "top_n": 2})
    assert r.status_code == 200, r.text
    assert calls == {"check_query": 1, "check_top_n": 1}, calls


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"query": " ", "documents": ["a"]}, 400, "query must not be empty"),
    ({"query": "q" * 101, "documents": ["a"]}, 413, "query has 101 characters, more than the limit of 100"),
    ({"query": "q", "documents": []}, 400, "documents must not be empty"),
    ({"query": "q", "documents": ["a", "x" * 201]}, 413, "documents[1] has 201 characters, more than the limit of 200"),
    ({"query": "q", "documents": ["a"], "model": "nope"}, 404, "nope"),
])
async def test_each_rule_still_refuses_with_its_status_in_every_rerank_dialect(served, body: dict, status: int,
                                                                              message: str) -> None:
    """The rules moved into one step; their answers did not change (status and message)."""
    async with served.client() as c:
        for path in ("/v1/rerank", "/v2/rerank"):
            r = await c.post(path, json=body)
            assert r.status_code == status and message in r.json()["error"]["message"], (path, r.text)
        tei = {"query": body["query"], "texts": body["documents"]}
        if "model" not in body:
            r = await c.post("/rerank", json=tei)
            assert r.status_code == status and message.replace("documents", "texts") in r.json()["error"], r.text
    assert served.reranker.behaviour.calls == [], "a refused request reached the reranker"


async def test_a_search_over_max_top_n_is_refused_at_the_edge(served) -> None:
    async with served.client() as c:
        r = await c.post("/v1/search", json={"query": "q", "top_n": 101})  # limits.max_top_n: 100
    assert r.status_code == 400 and r.json()["error"]["message"] == "top_n: must be ≤ 100, got 101"
    assert served.searcher.behaviour.calls == [], "the searcher got a call the edge refuses"


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/embeddings", {"input": ["a", "b", "c"], "instruction": "find it", "input_type": "search_query"}),
    ("/embed", {"inputs": ["a", "b", "c"]}),  # TEI
])
async def test_each_rule_of_an_embedding_request_is_checked_once(served, monkeypatch, path: str, body: dict) -> None:
    calls = _counted(monkeypatch)
    async with served.client() as c:
        r = await c.post(path, json=body)
    assert r.status_code == 200, r.text
    expected = {"check_not_empty": 1, "check_size": 3, "check_instruction": 1}
    assert calls == ({**expected, "resolve embedder": 1} if path == "/v1/embeddings" else expected), calls

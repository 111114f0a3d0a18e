"""Chunked reranking with a real model: the served ranking (the real app in process, the real
Reranker component on a tiny random cross-encoder, the real tokenizer at the ingress) against a
brute-force hand computation — every chunk scored alone with the model, a document's key the
largest — and the BF16 boundary re-score on the aggregated keys. The planner's chunks against the
tokenizer; the cost of the most hostile allowed document."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

from steadyrank.serve.runtime import ModelSettings, load_scorer
from steadyrank.serve.runtime.chunking import aggregate_max, chunk_spans, plan_chunks
from steadyrank.serve.server.components.metrics_hub import MetricsHub
from steadyrank.serve.server.components.reranker import Reranker
from steadyrank.serve.server.hosting.colocated import LocalHandle
from steadyrank.serve.server.http import Services, create_app
from steadyrank.serve.server.http.dialects.documents import _load_encoder
from steadyrank.serve.server.http.dialects.names import ServedNames
from steadyrank.serve.settings import load_settings
from steadyrank.serve.telemetry import Recorder
from tests.http.conftest import FakeEmbedder, FakeEvaluator, FakeSearcher

QUERY = "which report mentions the lighthouse keeper"
WORDS = ("harbour tide ledger lantern keeper storm granite ferry beacon gull mooring rope cargo pilot "
         "chart compass anchor signal current shoal").split()
MAX_LENGTH = 32


def _document(seed: int, words: int) -> str:
    rng = np.random.default_rng(seed)
    return " ".join(rng.choice(WORDS, size=words)) + "."


DOCS = [_document(i, n) for i, n in enumerate((12, 60, 150, 90, 40, 200))]


def _app(model: Path, precision: str = "fp32", **chunking: object) -> tuple[httpx.AsyncClient, Reranker]:
    settings = load_settings({"reranker": {"path": str(model), "precision": precision, "max_length": MAX_LENGTH},
                              "chunking": {"overlap_tokens": 4, **chunking}})
    hub = MetricsHub()
    reranker = Reranker(settings, settings.reranker_model.model_dump(), "primary", hub.store)
    names = ServedNames(reranker=("tiny",), embedder=("fake",), embedder_dim=4, matryoshka=False)
    services = Services(settings=settings, names=names, recorder=Recorder(hub.store, flush_interval_s=60),
                        searcher=LocalHandle(FakeSearcher()), embedder=LocalHandle(FakeEmbedder()),
                        reranker=LocalHandle(reranker), hub=LocalHandle(hub), evaluator=LocalHandle(FakeEvaluator()))
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(services)), base_url="http://test")
    return client, reranker


def _rerank(client: httpx.AsyncClient, body: dict) -> dict:
    async def call() -> dict:
        async with client:
            r = await client.post("/v1/rerank", json=body)
        assert r.status_code == 200, r.text
        return r.json()

    return asyncio.run(call())


@pytest.fixture(scope="module")
def model(make_cross_encoder) -> Path:
    return make_cross_encoder(num_labels=1, seed=3)


def _room(tokenizer, query: str) -> int:
    return MAX_LENGTH - tokenizer.num_special_tokens_to_add(pair=True) - len(tokenizer(query, add_special_tokens=False)["input_ids"])


def test_chunked_scores_equal_the_max_over_chunks_scored_alone(model: Path, tokenizer) -> None:
    client, _ = _app(model)
    body = _rerank(client, {"query": QUERY, "documents": DOCS, "max_chunks_per_doc": 16})
    # brute force: the same chunks, each scored alone (one forward pass per chunk), the max taken by hand
    encode = _load_encoder(model)
    plan = plan_chunks(encode, DOCS, _room(tokenizer, QUERY), 4, 16, 10_000)
    scorer = load_scorer(ModelSettings(path=str(model), precision="fp32", max_length=MAX_LENGTH))
    best, winner, best_score = [], [], []
    for d, start in enumerate(plan.starts):
        alone = [scorer.score([(QUERY, t)]) for t in plan.texts[start:start + plan.counts[d]]]
        assert not any(s.truncated[0] for s in alone)  # query + chunk fit max_length
        keys = [float(s.keys[0]) for s in alone]
        k = max(range(len(keys)), key=lambda j: (keys[j], -j))
        best.append(keys[k])
        winner.append(k)
        best_score.append(float(alone[k].scores[0]))
    assert max(plan.counts) > 3  # the long documents really were chunked
    expected = sorted(range(len(DOCS)), key=lambda d: (-best[d], d))
    assert [r["index"] for r in body["results"]] == expected
    np.testing.assert_allclose([r["relevance_score"] for r in body["results"]], [best_score[d] for d in expected],
                               rtol=0, atol=2e-6)
    for facts in body["meta"]["chunks"]:
        d = facts["index"]
        assert facts["chunks_scored"] == plan.counts[d]
        assert facts["chunk"] == winner[d]
        assert (facts["start"], facts["end"]) == plan.spans[plan.starts[d] + winner[d]]
    assert body["meta"]["truncated"] == []  # 16 chunks cover every document


def test_a_document_past_its_chunks_is_reported_truncated(model: Path) -> None:
    client, _ = _app(model)
    body = _rerank(client, {"query": QUERY, "documents": DOCS, "max_chunks_per_doc": 2})
    facts = {f["index"]: f for f in body["meta"]["chunks"]}
    assert {d for d, f in facts.items() if f["chunks_scored"] == 2} >= set(body["meta"]["truncated"])
    assert 5 in body["meta"]["truncated"] and 0 not in body["meta"]["truncated"]


def test_bf16_tie_of_aggregated_keys_is_settled_in_fp32(make_cross_encoder) -> None:
    """Logits of 4.99 ± 5e-5 on every chunk: all 5.0 in BF16, so the documents' aggregated keys tie
    across top_n; the FP32 re-score runs every chunk of the tied documents and aggregates them."""

    def edit(m: torch.nn.Module) -> None:
        m.classifier.bias.fill_(5.0)

    tied = make_cross_encoder(num_labels=1, seed=1, edit=edit)
    docs = DOCS[:4]
    fp32 = _rerank(_app(tied)[0], {"query": QUERY, "documents": docs, "max_chunks_per_doc": 8})
    bf16 = _rerank(_app(tied, "bf16")[0], {"query": QUERY, "documents": docs, "max_chunks_per_doc": 8, "top_n": 1})
    assert fp32["meta"]["tie_groups"] == []
    assert bf16["meta"]["tie_groups"] == [list(range(len(docs)))]  # the BF16 aggregated keys tie
    assert (bf16["meta"]["rescored_ties"], bf16["meta"]["tie_at_cutoff"]) == (len(docs), False)
    assert bf16["results"][0]["index"] == fp32["results"][0]["index"]  # FP32 decided the boundary


def test_chunks_cover_the_document_and_each_fits_alone(tokenizer) -> None:
    encode = _load_encoder(Path(tokenizer.name_or_path))
    text = "Tokenisation: un-believably long words like pneumonoultramicroscopicsilicovolcanoconiosis split. " * 12
    [(_, offsets)] = encode([text], False)
    spans, left = chunk_spans(offsets, len(text), 20, 5, 100)
    assert not left and spans[0][0] == 0 and spans[-1][1] == len(text.rstrip())
    for (s0, e0), (s1, _) in zip(spans, spans[1:], strict=False):
        assert s0 < s1 < e0  # neighbours overlap, and every chunk moves on
    for s, e in spans:  # each chunk's text, tokenised alone, fits the room
        assert len(tokenizer(text[s:e], add_special_tokens=False)["input_ids"]) <= 20
    cut, left = chunk_spans(offsets, len(text), 20, 5, 3)
    assert left and cut == spans[:3]


def test_aggregate_takes_the_first_chunk_among_equal_keys() -> None:
    keys, winners = aggregate_max(np.array([1.0, 3.0, 3.0, -1.0, 2.0], np.float32), [3, 1, 1])
    assert keys.tolist() == [3.0, -1.0, 2.0] and winners.tolist() == [1, 0, 0]


def test_the_most_hostile_allowed_document_costs_at_most_max_chunks(tokenizer) -> None:
    """A document of limits.max_document_chars one-character words (the most tokens a document of
    that size can have with this tokenizer: one per character, less the spaces) is tokenised once
    and yields at most max_chunks_per_doc chunks; a request of such documents is refused at the
    first document past max_chunks_per_request, the rest never tokenised."""
    limits = load_settings({}).limits
    chunking = load_settings({}).chunking
    hostile = ("a " * (limits.max_document_chars // 2))[: limits.max_document_chars]
    encoder = _load_encoder(Path(tokenizer.name_or_path))
    tokenised: list[int] = []

    def encode(texts: list[str], special: bool):
        tokenised.extend(len(t) for t in texts)
        return encoder(texts, special)

    [(ids, _)] = encoder([hostile], False)
    assert len(ids) <= limits.max_document_chars  # tokens ≤ characters: the tokenising is bounded by the size limit
    plan = plan_chunks(encode, [hostile], 500, 32, chunking.max_chunks_per_doc, chunking.max_chunks_per_request)
    assert plan.counts == [chunking.max_chunks_per_doc] and plan.cut == [0]
    tokenised.clear()
    documents = [hostile] * limits.max_documents
    with pytest.raises(Exception, match="max_chunks_per_request"):
        plan_chunks(encode, documents, 500, 32, chunking.max_chunks_per_doc, chunking.max_chunks_per_request)
    stopped_after = len(tokenised)
    assert stopped_after * chunking.max_chunks_per_doc <= chunking.max_chunks_per_request + chunking.max_chunks_per_doc
    assert stopped_after < limits.max_documents

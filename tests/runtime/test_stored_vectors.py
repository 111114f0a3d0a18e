"""Reranking with the embedder itself scores from the index's stored FP32 vectors: the same scores
as re-embedding the documents in FP32 (up to float rounding), the same served order, and no document
forward pass. A real bi-encoder (the bundled all-MiniLM-L6-v2) on the embedded demo corpus."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from steadyrank.retrieval.corpus import read_documents
from steadyrank.retrieval.pipeline import local_models, search
from steadyrank.retrieval.routing import RoutingSettings
from steadyrank.retrieval.store import IndexStore, build_index
from steadyrank.serve.runtime import ModelSettings, load_embedder, load_scorer

DEMO = Path(__file__).resolve().parents[2] / "serve" / "data" / "demo" / "corpus.jsonl"
QUERIES = ["restart a crashed service automatically", "which process listens on a port", "disk is full"]


class CountingScorer:
    """The real scorer, counting the pairs it is asked to score."""

    def __init__(self, scorer) -> None:
        self.scorer, self.pairs = scorer, 0
        self.settings, self.rescores_boundary_ties = scorer.settings, scorer.rescores_boundary_ties

    def score(self, pairs):
        self.pairs += len(pairs)
        return self.scorer.score(pairs)

    def fp32_keys(self, pairs):
        return self.scorer.fp32_keys(pairs)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    embedder = load_embedder(ModelSettings(precision="fp32"))
    path = tmp_path_factory.mktemp("stored") / "idx"
    build_index(path, read_documents(DEMO)[:80], embedder)
    with IndexStore.open(path, embedder) as opened:
        yield opened, embedder


@pytest.fixture(scope="module")
def scorer():
    """The bundled MiniLM as the reranker (a bi-encoder scorer), loaded once for the module."""
    return load_scorer(ModelSettings(precision="fp32"))


@pytest.mark.parametrize("route", ["fixed50", "fixed100"])
def test_stored_vectors_score_like_reembedding(store, scorer, route) -> None:
    index, embedder = store
    assert scorer.settings.same_vectors(embedder.settings) and scorer.kind == "bi-encoder"
    settings = RoutingSettings(k_low=20, k_high=40, top_n=5)
    for query in QUERIES:
        counted = {flag: CountingScorer(scorer) for flag in (False, True)}
        ranked = {flag: asyncio.run(search(query, "hybrid", local_models(index, embedder, counted[flag], rrf_k=60.0,
                                                                          rrf_weights=(1.0, 1.0), stored_vectors=flag),
                                           settings, route)) for flag in (False, True)}
        reembedded, stored = ranked[False], ranked[True]
        assert counted[True].pairs == 0 and counted[False].pairs == reembedded.k  # no document forward pass
        assert stored.k == reembedded.k == (20 if route == "fixed50" else 40)
        np.testing.assert_allclose(stored.rerank_keys, reembedded.rerank_keys, rtol=0, atol=2e-6)
        np.testing.assert_allclose(stored.rerank_scores, reembedded.rerank_scores, rtol=0, atol=2e-6)
        assert stored.rerank_keys.dtype == np.float32
        gaps = np.diff(np.sort(reembedded.rerank_keys))
        if gaps.size and gaps.min() > 4e-6:  # no near-tie that rounding could flip
            assert stored.doc_ids == reembedded.doc_ids


def test_stored_vectors_are_the_embedders_vectors(store) -> None:
    index, embedder = store
    docs = read_documents(DEMO)[:3]
    stored = index.vectors([d.id for d in docs])
    fresh = embedder.encode([d.full_text for d in docs])
    assert stored.dtype == np.float32 and stored.shape == (3, embedder.dim)
    np.testing.assert_allclose(stored, fresh, rtol=0, atol=1e-6)
    with pytest.raises(KeyError):
        index.vectors(["no-such-document"])

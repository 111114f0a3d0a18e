"""Candidate generation: FAISS and BM25 indexes, fusion, the durable index store, dynamic-K routing.

>>> from steadyrank.retrieval import IndexStore, RoutingSettings, rerank_candidates
>>> store = IndexStore.open("idx", embedder, writable=True)        # verifies checksums and the embedder
>>> candidates = store.search("query", mode="hybrid", depth=100)  # dense | bm25 | hybrid (RRF)
>>> ranked = rerank_candidates(store, "query", candidates, reranker, RoutingSettings(), "dynamic")
>>> ranked.doc_ids, ranked.scores, ranked.decision.k_rerank, ranked.decision.reasons
>>> store.add([Document("id", "text")]); store.delete(["id"])      # durable when they return

Modules: ``corpus`` (documents, JSONL readers), ``dense`` (FAISS), ``bm25`` (bm25s), ``fusion`` (RRF),
``store`` (index directory, WAL, generations), ``shards`` (sharded index, scatter-gather),
``routing`` (pure dynamic-K policy and signals),
``pipeline`` (two-pass reranking), ``calibration`` (threshold search), ``protocols`` (model interfaces).
"""

from steadyrank.retrieval.bm25 import Bm25Settings
from steadyrank.retrieval.calibration import Calibration, calibrate, observe, replay_route
from steadyrank.retrieval.corpus import Corpus, CorpusError, Document, read_corpus, read_documents, read_queries
from steadyrank.retrieval.dense import DenseSettings
from steadyrank.retrieval.fsio import IndexLockedError
from steadyrank.retrieval.fusion import reciprocal_rank_fusion
from steadyrank.retrieval.pipeline import Ranked, rerank_candidates, serve_order
from steadyrank.retrieval.protocols import Embedder, Reranker
from steadyrank.retrieval.routing import (
    RoutingDecision,
    RoutingSettings,
    RoutingSignals,
    compute_signals,
    decide,
    load_settings,
)
from steadyrank.retrieval.store import Candidates, EmbedderMismatchError, IndexIntegrityError, IndexStore, build_index

__all__ = [
    "Bm25Settings", "Calibration", "Candidates", "Corpus", "CorpusError", "DenseSettings", "Document", "Embedder",
    "EmbedderMismatchError", "IndexIntegrityError", "IndexLockedError", "IndexStore", "Ranked", "Reranker",
    "RoutingDecision", "RoutingSettings", "RoutingSignals", "build_index", "calibrate", "compute_signals", "decide",
    "load_settings", "observe", "read_corpus", "read_documents", "read_queries", "reciprocal_rank_fusion",
    "replay_route", "rerank_candidates", "serve_order",
]

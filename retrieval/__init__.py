"""Candidate generation: FAISS and BM25 indexes, fusion, the durable index store, dynamic-K routing.

>>> from retrieval import IndexStore, RoutingSettings, rerank_candidates
>>> store = IndexStore.open("idx", embedder, writable=True)        # verifies checksums and the embedder
>>> candidates = store.search("query", mode="hybrid", depth=100)  # dense | bm25 | hybrid (RRF)
>>> ranked = rerank_candidates(store, "query", candidates, reranker, RoutingSettings(), "dynamic")
>>> ranked.doc_ids, ranked.scores, ranked.decision.k_rerank, ranked.decision.reasons
>>> store.add([Document("id", "text")]); store.delete(["id"])      # durable when they return

Modules: ``corpus`` (documents, JSONL readers), ``dense`` (FAISS), ``bm25`` (bm25s), ``fusion`` (RRF),
``store`` (index directory, WAL, generations), ``routing`` (pure dynamic-K policy and signals),
``pipeline`` (two-pass reranking), ``calibration`` (threshold search), ``protocols`` (model interfaces).
"""

from retrieval.bm25 import Bm25Settings
from retrieval.calibration import Calibration, calibrate, observe, replay_route
from retrieval.corpus import CorpusError, Document, read_documents, read_queries
from retrieval.dense import DenseSettings
from retrieval.fsio import IndexLockedError
from retrieval.fusion import reciprocal_rank_fusion
from retrieval.pipeline import Ranked, rerank_candidates, serve_order
from retrieval.protocols import Embedder, Reranker
from retrieval.routing import RoutingDecision, RoutingSettings, RoutingSignals, compute_signals, decide, load_settings
from retrieval.store import Candidates, EmbedderMismatchError, IndexIntegrityError, IndexStore, build_index

__all__ = [
    "Bm25Settings", "Calibration", "Candidates", "CorpusError", "DenseSettings", "Document", "Embedder",
    "EmbedderMismatchError", "IndexIntegrityError", "IndexLockedError", "IndexStore", "Ranked", "Reranker",
    "RoutingDecision", "RoutingSettings", "RoutingSignals", "build_index", "calibrate", "compute_signals", "decide",
    "load_settings", "observe", "read_documents", "read_queries", "reciprocal_rank_fusion", "replay_route",
    "rerank_candidates", "serve_order",
]

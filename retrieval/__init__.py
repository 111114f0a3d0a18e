"""Candidate generation: FAISS and BM25 indexes, fusion, the durable index store, dynamic-K routing.

>>> from steadyrank.retrieval import IndexStore, RoutingSettings, rerank_candidates
>>> store = IndexStore.open("idx", embedder, writable=True)        # verifies checksums and the embedder
>>> candidates = store.search("query", mode="hybrid", depth=100)  # dense | bm25 | hybrid (RRF)
>>> ranked = rerank_candidates(store, "query", candidates, reranker, RoutingSettings(), "dynamic")
>>> ranked.doc_ids, ranked.scores, ranked.decision.k_rerank, ranked.decision.reasons
>>> store.add([Document("id", "text")]); store.delete(["id"])      # durable when they return

Modules: ``corpus`` (documents, JSONL readers), ``dense`` (FAISS), ``bm25`` (bm25s), ``fusion`` (RRF),
``generations`` (the index directory's format), ``build`` (building an index), ``search`` (the
loaded index in memory and its search), ``store`` (loading, WAL, compaction), ``index`` (the ``Index``
protocol and ``open_index``), ``shards/`` (sharded index: ``on_disk``, ``gather``, ``build``,
``sharded_index``), ``candidate_pool`` (one query's candidates with their documents),
``layout`` (the files that mark an index directory; no FAISS),
``routing`` (pure dynamic-K policy and signals),
``pipeline`` (two-pass reranking), ``calibration`` (threshold search), ``protocols`` (model interfaces).

The names below are imported on first use (PEP 562), so importing one light submodule (say
``retrieval.modes`` in the HTTP ingress) does not load FAISS, bm25s and numba into the process.
"""

from typing import TYPE_CHECKING

from steadyrank.lazy import lazy_exports

if TYPE_CHECKING:  # what a type checker sees; at run time __getattr__ below imports each name on first use
    from steadyrank.retrieval.bm25 import Bm25Settings
    from steadyrank.retrieval.build import build_index
    from steadyrank.retrieval.calibration import Calibration, calibrate, observe, replay_route
    from steadyrank.retrieval.corpus import Corpus, CorpusError, Document, read_corpus, read_documents, read_queries
    from steadyrank.retrieval.dense import DenseSettings
    from steadyrank.retrieval.fsio import IndexLockedError, IndexWriteError
    from steadyrank.retrieval.fusion import reciprocal_rank_fusion
    from steadyrank.retrieval.generations import IndexIntegrityError
    from steadyrank.retrieval.index import Index, open_index
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
    from steadyrank.retrieval.search import Candidates
    from steadyrank.retrieval.shards.sharded_index import ShardedIndex
    from steadyrank.retrieval.store import EmbedderMismatchError, IndexStore

#: public name → the submodule that defines it
_EXPORTS: dict[str, str] = {
    "Bm25Settings": "steadyrank.retrieval.bm25",
    "Calibration": "steadyrank.retrieval.calibration",
    "calibrate": "steadyrank.retrieval.calibration",
    "observe": "steadyrank.retrieval.calibration",
    "replay_route": "steadyrank.retrieval.calibration",
    "Corpus": "steadyrank.retrieval.corpus",
    "CorpusError": "steadyrank.retrieval.corpus",
    "Document": "steadyrank.retrieval.corpus",
    "read_corpus": "steadyrank.retrieval.corpus",
    "read_documents": "steadyrank.retrieval.corpus",
    "read_queries": "steadyrank.retrieval.corpus",
    "DenseSettings": "steadyrank.retrieval.dense",
    "IndexLockedError": "steadyrank.retrieval.fsio",
    "IndexWriteError": "steadyrank.retrieval.fsio",
    "Index": "steadyrank.retrieval.index",
    "open_index": "steadyrank.retrieval.index",
    "reciprocal_rank_fusion": "steadyrank.retrieval.fusion",
    "Ranked": "steadyrank.retrieval.pipeline",
    "rerank_candidates": "steadyrank.retrieval.pipeline",
    "serve_order": "steadyrank.retrieval.pipeline",
    "Embedder": "steadyrank.retrieval.protocols",
    "Reranker": "steadyrank.retrieval.protocols",
    "RoutingDecision": "steadyrank.retrieval.routing",
    "RoutingSettings": "steadyrank.retrieval.routing",
    "RoutingSignals": "steadyrank.retrieval.routing",
    "compute_signals": "steadyrank.retrieval.routing",
    "decide": "steadyrank.retrieval.routing",
    "load_settings": "steadyrank.retrieval.routing",
    "Candidates": "steadyrank.retrieval.search",
    "EmbedderMismatchError": "steadyrank.retrieval.store",
    "IndexIntegrityError": "steadyrank.retrieval.generations",
    "IndexStore": "steadyrank.retrieval.store",
    "ShardedIndex": "steadyrank.retrieval.shards.sharded_index",
    "build_index": "steadyrank.retrieval.build",
}

# sorted(_EXPORTS), spelled out: a type checker reads only a literal __all__ (tests/test_layout.py checks both)
__all__ = [
    "Bm25Settings", "Calibration", "Candidates", "Corpus", "CorpusError", "DenseSettings", "Document",
    "Embedder", "EmbedderMismatchError", "Index", "IndexIntegrityError", "IndexLockedError", "IndexStore",
    "IndexWriteError", "Ranked", "Reranker", "RoutingDecision", "RoutingSettings", "RoutingSignals",
    "ShardedIndex", "build_index", "calibrate", "compute_signals", "decide", "load_settings", "observe",
    "open_index", "read_corpus", "read_documents", "read_queries", "reciprocal_rank_fusion", "replay_route",
    "rerank_candidates", "serve_order",
]
__getattr__ = lazy_exports(__name__, _EXPORTS)

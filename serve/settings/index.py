"""The ``index`` section: the index the Retriever serves and how it is sharded."""

from __future__ import annotations

from pydantic import Field

from steadyrank.serve.settings.base import Section


class IndexSettings(Section):
    """The FAISS + BM25 index the Retriever serves (``retrieval.store``)."""

    path: str | None = Field(
        default=None, description="index directory; unset = a cache directory derived from corpus and embedder"
    )
    corpus: str | None = Field(
        default=None, description="corpus to index when `path` holds no index yet (BEIR corpus.jsonl, a BEIR folder "
                          "or JSONL); unset with `path` unset = the embedded demo corpus"
    )
    factory: str = Field(default="Flat", description="FAISS index_factory string for a new index: Flat, 'HNSW32,Flat', 'IVF1024,SQ8'…")
    ef_construction: int = Field(default=200, ge=1, description="HNSW build breadth (new index)")
    ef_search: int = Field(default=128, ge=1, description="HNSW search breadth (new index)")
    nprobe: int = Field(default=16, ge=1, description="IVF lists probed per query (new index)")
    bm25: bool = Field(default=True, description="build a BM25 index too (needed by bm25 and hybrid modes)")
    shards: int = Field(default=1, ge=1, description="shard indexes (one Retriever deployment each; 1 = unsharded)")
    shard_timeout_s: float = Field(default=5.0, gt=0, description="deadline of each shard's answer to one search")
    partial_results: bool = Field(default=False, description="a shard missing its deadline: false = the search fails "
                                                     "(503), true = the other shards' results with meta.partial")
    shard_resource: str | None = Field(
        default=None, description="custom Ray resource prefix placing shard i's replicas on nodes offering "
                          "`<prefix><i>` (e.g. shard_ → shard_0, shard_1); null = place anywhere"
    )

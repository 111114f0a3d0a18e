"""Candidate pools: per query, the union of dense, BM25 and hybrid lists of one or more indexes.

Each candidate keeps its provenance ``{"<index>:<retriever>": rank}`` (1-based). The pool order is
RRF over every contributing list (k = ``rrf_k``), which breaks ties and feeds the judge a stable
order. One ``hybrid`` search per index yields all three lists (its dense and BM25 components are
retrieved at the same depth).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from steadyrank.retrieval.fusion import reciprocal_rank_fusion
from steadyrank.retrieval.store import IndexStore

Retriever = Literal["dense", "bm25", "hybrid"]
RETRIEVERS: tuple[Retriever, ...] = ("dense", "bm25", "hybrid")


@dataclass(frozen=True)
class PoolEntry:
    doc_id: str
    provenance: dict[str, int]


def pool_query(stores: Sequence[tuple[str, IndexStore]], query: str, retrievers: Sequence[Retriever], *,
               depth: int, rrf_k: float) -> list[PoolEntry]:
    """The pool of ``query``: every candidate of every (index, retriever) list, in RRF order."""
    lists: dict[str, list[str]] = {}
    for name, store in stores:
        if set(retrievers) == {"bm25"}:
            found = {"bm25": store.search(query, mode="bm25", depth=depth).doc_ids}
        elif set(retrievers) == {"dense"}:
            found = {"dense": store.search(query, mode="dense", depth=depth).doc_ids}
        else:
            hybrid = store.search(query, mode="hybrid", depth=depth, rrf_k=rrf_k)
            assert hybrid.dense is not None and hybrid.sparse is not None  # hybrid computes both lists
            found = {"dense": hybrid.dense.doc_ids, "bm25": hybrid.sparse.doc_ids, "hybrid": hybrid.doc_ids}
        for retriever in retrievers:
            lists[f"{name}:{retriever}"] = found[retriever]
    order, _ = reciprocal_rank_fusion(list(lists.values()), k=rrf_k)
    return [PoolEntry(doc, {source: ranked.index(doc) + 1 for source, ranked in lists.items() if doc in ranked})
            for doc in order]

"""The components' calls and answers (the lowest part of ``serve/server``: the components, the HTTP
edge's dialects and the shadow evaluator all use them; they import nothing of ``serve``).

- :data:`Variant`: which reranker serves a search;
- :class:`SearchCall` → :class:`SearchOutcome`: the ``Searcher``'s call and answer (with
  :class:`SearchResult`, :class:`Candidate`, :class:`SearchMeta`);
- :class:`RerankOutcome`: the ``Reranker``'s ``rerank`` answer, which every rerank dialect renders.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_serializer

from steadyrank.retrieval.modes import Mode
from steadyrank.retrieval.rewrite import DenoiseMode
from steadyrank.retrieval.routing import Route

if TYPE_CHECKING:
    from steadyrank.retrieval.pipeline import Ranked

#: Which reranker serves a search: the primary one, or the canary (shadow copies only).
Variant = Literal["primary", "canary"]


class ResponseModel(BaseModel):
    """A response body: undeclared fields are refused; the optional fields named in ``omit_none``
    are left out of the JSON when unset (rather than written as null)."""

    model_config = ConfigDict(extra="forbid")
    omit_none: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _omit(self, handler: Any) -> Any:
        data = handler(self)
        for name in self.omit_none:
            if data.get(name, 0) is None:
                del data[name]
        return data


class SearchResult(ResponseModel):
    id: str
    relevance_score: float
    text: str | None = None
    title: str | None = None
    omit_none: ClassVar[tuple[str, ...]] = ("text", "title")


class Candidate(ResponseModel):
    id: str
    relevance_score: float = Field(..., description="exact float32 reranker score")
    rank_key: float = Field(..., description="the value the ranking sorts by (HPS: the FP32 logit margin)")


class SearchMeta(ResponseModel):
    k: int = Field(..., description="candidates reranked (the K the router chose)")
    escalated: bool
    reasons: list[str]
    signals: dict[str, Any] = Field(..., description="the routing signals (retrieval.routing.RoutingSignals)")
    stages_ms: dict[str, float] = Field(..., description="denoise (when on), embed, retrieve, rerank, route, total")
    retrieval_ms: dict[str, float] = Field(..., description="the index store's own timings (dense, bm25, fuse, …)")
    mode: Mode
    retrieved: int
    tie_groups: list[list[str]]
    tie_at_cutoff: bool
    tie_group_size_at_cutoff: int
    rescored_ties: int
    model: str
    precision: str
    scoring: str
    variant: Variant
    shadow: bool
    partial: bool = Field(default=False, description="a sharded index answered without every shard "
                                             "(index.partial_results: true); see missing_shards")
    missing_shards: list[int] = Field(default_factory=list, description="shards that did not answer")
    query: dict[str, str] | None = Field(default=None, description="original and rewritten query, the denoise mode and its "
                                                           "source (off, rules, llm, llm-cache, rules-fallback)")


class SearchCall(BaseModel):
    """The Searcher's request: the ``/v1/search`` body plus the shadow evaluator's fields."""

    model_config = ConfigDict(extra="forbid")

    query: str
    top_n: int | None = Field(default=None, ge=1)
    mode: Mode | None = None
    shadow: bool = False
    variant: Variant = "primary"
    route: Route | None = None
    return_documents: bool = True
    denoise: DenoiseMode | None = None
    deadline: float | None = Field(default=None, description="epoch seconds after which model work is dropped")


class SearchOutcome(ResponseModel):
    """The Searcher's answer: the top ``top_n`` results, every reranked candidate in served order, meta."""

    results: list[SearchResult]
    candidates: list[Candidate]
    meta: SearchMeta

    @classmethod
    def build(cls, ranked: Ranked, call: SearchCall, *, top_n: int, mode: Mode, facts: dict[str, Any],
              total_s: float) -> SearchOutcome:
        """From the pipeline's :class:`~retrieval.pipeline.Ranked` and the reranker's facts (``info``)."""
        pool, ids = ranked.candidates, ranked.candidates.doc_ids
        order = ranked.served()
        candidates = [Candidate(id=ids[i], relevance_score=float(ranked.rerank_scores[i]),
                                rank_key=float(ranked.rerank_keys[i])) for i in order]
        results = []
        for i in order[:top_n]:
            doc = pool.documents[i]
            results.append(SearchResult(id=ids[i], relevance_score=float(ranked.rerank_scores[i]),
                                        text=doc.text if call.return_documents else None,
                                        title=doc.title if call.return_documents and doc.title else None))
        ranking, decision, signals = ranked.ranking, ranked.decision, ranked.signals
        # a search reranks its candidates, so its Ranked carries the ranking and the routing decision
        assert ranking is not None and decision is not None and signals is not None
        meta = SearchMeta(
            k=ranked.k, escalated=decision.escalated, reasons=list(decision.reasons), signals=signals.to_json(),
            stages_ms={**{name: 1000.0 * v for name, v in ranked.timings.items()}, "total": 1000.0 * total_s},
            retrieval_ms={name: 1000.0 * v for name, v in pool.timings.items()},
            mode=mode, retrieved=len(ids), tie_groups=[[ids[i] for i in g] for g in ranking.tie_groups],
            tie_at_cutoff=ranking.tie_at_cutoff, tie_group_size_at_cutoff=ranking.tie_group_size_at_cutoff,
            rescored_ties=ranking.rescored, model=facts["model"], precision=facts["precision"],
            scoring=facts["scoring"], variant=call.variant, shadow=call.shadow,
            partial=bool(pool.missing_shards), missing_shards=list(pool.missing_shards),
            query=None if ranked.query is None else ranked.query.to_json(),
        )
        return cls(results=results, candidates=candidates, meta=meta)


@dataclass(frozen=True)
class RerankOutcome:
    """One ranking of a request's documents (``Reranker.rerank``).

    ``scores``: float32 (n,) in input order; ``order``: input indices in served order (rank key
    descending, ties by input index unless boundary re-scoring settled them); ``tie_groups``: groups
    (≥ 2) of input indices with exactly equal rank keys, in rank order; ``tie_at_cutoff`` and
    ``tie_group_size_at_cutoff``: the group straddling ``top_n``; ``rescored``: documents re-scored in
    FP32 to settle it; ``truncated``: indices of documents cut to the model's max_length (chunked:
    a chunk cut, or tokens past the last chunk); the model's id, precision and scoring. Chunked
    reranking (else None): ``chunks[d]`` chunks scored of document d, ``winners[d]`` the one whose
    key is the document's, ``spans[d]`` its character span in the document (set by the ingress,
    which planned the chunks)."""

    scores: np.ndarray
    order: list[int]
    tie_groups: list[list[int]]
    tie_at_cutoff: bool
    tie_group_size_at_cutoff: int
    rescored: int
    truncated: list[int]
    model: str
    precision: str
    scoring: str
    winners: list[int] | None = None
    chunks: list[int] | None = None
    spans: list[tuple[int, int]] | None = None

    def served_order(self, top_n: int | None) -> list[int]:
        """Input indices in served order, the first ``top_n`` (all when None)."""
        order = [int(i) for i in self.order]
        return order if top_n is None else order[:top_n]

    def tie_facts(self, top_n: int | None = None) -> dict[str, Any]:
        """The precision and tie facts every rerank dialect reports (``RerankMeta``), with the
        winning chunks of the first ``top_n`` results (chunked reranking)."""
        return {"precision": self.precision, "scoring": self.scoring, "tie_groups": self.tie_groups,
                "tie_at_cutoff": bool(self.tie_at_cutoff), "rescored_ties": int(self.rescored),
                "truncated": self.truncated, "chunks": self.chunk_list(self.served_order(top_n))}

    def chunk_list(self, indices: list[int]) -> list[dict[str, Any]] | None:
        """:meth:`chunk_facts` of ``indices`` (the served results), or None without chunked reranking."""
        facts = [self.chunk_facts(i) for i in indices]
        return None if self.winners is None else [f for f in facts if f is not None]

    def chunk_facts(self, index: int) -> dict[str, Any] | None:
        """Document ``index``'s winning chunk (``chunk``, its character span ``start``/``end``) and
        ``chunks_scored``; None without chunked reranking."""
        if self.winners is None or self.chunks is None or self.spans is None:
            return None
        start, end = self.spans[index]
        return {"index": index, "chunk": self.winners[index], "start": start, "end": end,
                "chunks_scored": self.chunks[index]}

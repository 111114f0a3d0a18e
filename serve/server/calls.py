"""The components' calls and answers (the lowest part of ``serve/server``: the components, the HTTP
edge's dialects and the shadow evaluator all use them; they import nothing of ``serve``).

- :class:`Deadline`: when a call's time runs out (a monotonic instant, sent as the seconds it has left);
- :data:`Variant`: which reranker serves a search;
- :class:`SearchCall` → :class:`SearchOutcome`: the ``Searcher``'s call and answer (with
  :class:`SearchResult`, :class:`Candidate`, :class:`SearchMeta`);
- :class:`RerankOutcome`: the ``Reranker``'s ``rerank`` answer, which every rerank dialect renders;
- :class:`ScoreOutcome`: the ``Reranker``'s ``score`` answer; :class:`EmbedOutcome`: the ``Embedder``'s ``embed`` answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from time import monotonic
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_serializer

from steadyrank.retrieval.modes import Mode
from steadyrank.retrieval.rewrite import DenoiseMode
from steadyrank.retrieval.routing import Route

if TYPE_CHECKING:
    from steadyrank.retrieval.pipeline import Ranked

@dataclass(frozen=True)
class Deadline:
    """When a call's time runs out: ``at``, an instant of this host's ``time.monotonic()`` (seconds).

    ``time.monotonic()`` counts from an arbitrary point of each host, so an instant means nothing on
    another host (the multi-node layout). A Deadline therefore crosses a process boundary as the
    seconds it has left: pickled (a Ray call's arguments, a :class:`SearchCall`), it is
    ``remaining()``, and unpickled it is rebuilt as that many seconds from the receiver's clock
    (:meth:`after`). That is correct in every layout, one host or many; the call's time in transit
    (pickling to unpickling: the network, a few ms) is not counted against it.
    """

    at: float

    @classmethod
    def after(cls, seconds: float, since: float | None = None) -> Deadline:
        """The deadline ``seconds`` after ``since`` (a ``time.monotonic()`` instant; default now)."""
        return cls((monotonic() if since is None else since) + seconds)

    def remaining(self) -> float:
        """Seconds left until the deadline, 0 once it passed."""
        return max(0.0, self.at - monotonic())

    def expired(self) -> bool:
        """Whether the deadline passed (now ≥ ``at``)."""
        return monotonic() >= self.at

    def __reduce__(self) -> tuple[Any, tuple[float]]:
        """Pickled as the seconds left, rebuilt from the receiver's clock (see the class docstring)."""
        return Deadline.after, (self.remaining(),)


#: Which reranker serves a search: the primary one, or the canary (shadow copies only).
Variant = Literal["primary", "canary"]


class ResponseModel(BaseModel):
    """A response body: undeclared fields are refused; the optional fields named in ``omit_none``
    are left out of the JSON when unset (rather than written as null)."""

    model_config = ConfigDict(extra="forbid")
    omit_none: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> Any:
        """The JSON schema of the fields: the wrap serializer below would otherwise make the
        serialization-mode schema (the served OpenAPI's responses) an empty ``{}``."""
        return handler({k: v for k, v in core_schema.items() if k != "serialization"})

    @model_serializer(mode="wrap")
    def _omit(self, handler: Any) -> Any:
        data = handler(self)
        for name in self.omit_none:
            if data.get(name, 0) is None:
                del data[name]
        return data


#: The description of every answer's ``calibrated_score`` (docs/guides/runtime.md, "Calibrated scores").
CALIBRATED_SCORE = ("P(relevant): the reranker's score_calibration (written by `steadyrank calibrate`) applied to "
                    "the FP32 rank key, strictly increasing in it (ranking unchanged); omitted when the model has none")


class CalibrationMeta(ResponseModel):
    """What an answer says about the calibration behind its ``calibrated_score``."""

    model: str = Field(..., description="the model id the calibration was fitted on")
    golden: str | None = Field(..., description="the golden set it was fitted on")
    threshold: int = Field(..., description="rubric grade from which a document counts as relevant")
    method: str = Field(..., description="the fitted map (platt: σ(a·key + b), a > 0)")
    model_mismatch: bool = Field(..., description="fitted on another model than the one served "
                                                  "(served only with score_calibration_mismatch: flag)")


class SearchResult(ResponseModel):
    id: str
    relevance_score: float
    text: str | None = None
    title: str | None = None
    calibrated_score: float | None = Field(None, description=CALIBRATED_SCORE)
    omit_none: ClassVar[tuple[str, ...]] = ("text", "title", "calibrated_score")


class Candidate(ResponseModel):
    id: str
    relevance_score: float = Field(..., description="exact float32 reranker score")
    rank_key: float = Field(..., description="the value the ranking sorts by (HPS: the FP32 logit margin)")
    calibrated_score: float | None = Field(None, description=CALIBRATED_SCORE)
    omit_none: ClassVar[tuple[str, ...]] = ("calibrated_score",)


class SearchMeta(ResponseModel):
    k: int = Field(..., description="candidates reranked (the K the router chose)")
    escalated: bool
    reasons: list[str]
    signals: dict[str, Any] = Field(..., description="the routing signals (retrieval.routing.RoutingSignals)")
    stages_ms: dict[str, float] = Field(..., description="denoise (when on), embed, retrieve, dedup (when on), rerank, "
                                                         "route, boost (when on), total")
    retrieval_ms: dict[str, float] = Field(..., description="the index store's own timings (dense, bm25, fuse, …)")
    mode: Mode
    retrieved: int
    tie_groups: list[list[str]]
    tie_at_cutoff: bool
    tie_group_size_at_cutoff: int
    rescored_ties: int
    cutoff_certified: bool | None = Field(
        default=None, description="certified cutoffs: the top_n set is FP32's, every candidate within twice the "
                                  "forward's score error bound of the cutoff re-scored in FP32 (null: not in force)")
    rescored_near_cutoff: int = Field(default=0, description="certified cutoffs: candidates re-scored in FP32 near "
                                                             "top_n beyond an exact tie (rescored_ties)")
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
    suppressed: dict[str, str] = Field(default_factory=dict, description="near-duplicates suppressed by search.dedup_threshold: "
                                                                      "id → the kept candidate it duplicates (served last)")
    reranked: bool = Field(default=True, description="false when no reranker ran (a segment's reranker bypass: "
                                                    "the first stage's order and scores)")
    calibration: CalibrationMeta | None = Field(default=None, description="the calibration behind calibrated_score; "
                                                                      "omitted when the reranker has none")
    omit_none: ClassVar[tuple[str, ...]] = ("calibration",)


class SearchCall(BaseModel):
    """The Searcher's request: the ``/v1/search`` body plus the shadow evaluator's fields."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    query: str
    top_n: int | None = Field(default=None, ge=1)
    mode: Mode | None = None
    shadow: bool = False
    variant: Variant = "primary"
    route: Route | None = None
    return_documents: bool = True
    denoise: DenoiseMode | None = None
    deadline: Deadline | None = Field(default=None, exclude=True,
                                      description="after which model work is dropped (not in the call's mapping)")
    rerank: bool = Field(default=True, description="false: serve the first stage's order, no reranker "
                                                  "(a segment's reranker bypass, the first-stage golden replays)")


class SearchOutcome(ResponseModel):
    """The Searcher's answer: the top ``top_n`` results, every reranked candidate in served order, meta."""

    results: list[SearchResult]
    candidates: list[Candidate]
    meta: SearchMeta

    @classmethod
    def build(cls, ranked: Ranked, call: SearchCall, *, top_n: int, mode: Mode, facts: dict[str, Any],
              total_s: float, calibrated: np.ndarray | None = None,
              calibration: dict[str, Any] | None = None) -> SearchOutcome:
        """From the pipeline's :class:`~retrieval.pipeline.Ranked` and the reranker's facts (``info``);
        ``calibrated``: the candidates' calibrated scores (float64, candidate order) and ``calibration``
        its facts, when the reranker has a score calibration."""
        pool, ids = ranked.candidates, ranked.candidates.doc_ids
        if ranked.ranking is None:  # no reranker: the first stage's order and scores
            order, scores, keys = list(range(len(ids))), ranked.scores, ranked.scores
        else:
            order, scores, keys = ranked.served(), ranked.rerank_scores, ranked.rerank_keys

        def calibrated_score(i: int) -> float | None:
            return None if calibrated is None else float(calibrated[i])

        candidates = [Candidate(id=ids[i], relevance_score=float(scores[i]), rank_key=float(keys[i]),
                                calibrated_score=calibrated_score(i))
                      for i in order]
        results = []
        for i in order[:top_n]:
            doc = pool.documents[i]
            results.append(SearchResult(id=ids[i], relevance_score=float(scores[i]),
                                        text=doc.text if call.return_documents else None,
                                        title=doc.title if call.return_documents and doc.title else None,
                                        calibrated_score=calibrated_score(i)))
        if ranked.ranking is None:
            return cls(results=results, candidates=candidates, meta=SearchMeta(
                k=0, escalated=False, reasons=[], signals={},
                stages_ms={**{name: 1000.0 * v for name, v in ranked.timings.items()}, "total": 1000.0 * total_s},
                retrieval_ms={name: 1000.0 * v for name, v in pool.timings.items()}, mode=mode, retrieved=len(ids),
                tie_groups=[], tie_at_cutoff=False, tie_group_size_at_cutoff=0, rescored_ties=0, model="none",
                precision="none", scoring="first_stage", variant=call.variant, shadow=call.shadow,
                partial=bool(pool.missing_shards), missing_shards=list(pool.missing_shards),
                query=None if ranked.query is None else ranked.query.to_json(), reranked=False))
        ranking, decision, signals = ranked.ranking, ranked.decision, ranked.signals
        # a search reranks its candidates, so its Ranked carries the ranking and the routing decision
        assert ranking is not None and decision is not None and signals is not None
        meta = SearchMeta(
            k=ranked.k, escalated=decision.escalated, reasons=list(decision.reasons), signals=signals.to_json(),
            stages_ms={**{name: 1000.0 * v for name, v in ranked.timings.items()}, "total": 1000.0 * total_s},
            retrieval_ms={name: 1000.0 * v for name, v in pool.timings.items()},
            mode=mode, retrieved=len(ids), tie_groups=[[ids[i] for i in g] for g in ranking.tie_groups],
            tie_at_cutoff=ranking.tie_at_cutoff, tie_group_size_at_cutoff=ranking.tie_group_size_at_cutoff,
            rescored_ties=ranking.rescored, cutoff_certified=ranking.certified,
            rescored_near_cutoff=ranking.near_rescored, model=facts["model"], precision=facts["precision"],
            scoring=facts["scoring"], variant=call.variant, shadow=call.shadow,
            partial=bool(pool.missing_shards), missing_shards=list(pool.missing_shards),
            query=None if ranked.query is None else ranked.query.to_json(),
            suppressed=dict(ranked.demoted),
            calibration=None if calibration is None else CalibrationMeta(**calibration),
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
    a chunk cut, or tokens past the last chunk); the model's id, precision and scoring;
    ``calibrated``: float64 (n,) calibrated scores in input order and ``calibration`` their
    :class:`CalibrationMeta` facts, when the model has a score calibration. Chunked reranking (else
    None): ``chunks[d]`` chunks scored of document d, ``winners[d]`` the one whose key is the
    document's, ``spans[d]`` its character span in the document (set by the ingress, which planned
    the chunks)."""

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
    calibrated: np.ndarray | None = None
    calibration: dict[str, Any] | None = None
    near_rescored: int = 0
    cutoff_certified: bool | None = None
    winners: list[int] | None = None
    chunks: list[int] | None = None
    spans: list[tuple[int, int]] | None = None

    def served_order(self, top_n: int | None) -> list[int]:
        """Input indices in served order, the first ``top_n`` (all when None)."""
        order = [int(i) for i in self.order]
        return order if top_n is None else order[:top_n]

    def calibrated_field(self, i: int) -> dict[str, float]:
        """``{"calibrated_score": …}`` of input document ``i`` for a dialect's result, ``{}`` without a calibration."""
        return {} if self.calibrated is None else {"calibrated_score": float(self.calibrated[i])}

    def calibration_facts(self) -> dict[str, Any]:
        """``{"calibration": facts}`` for a dialect's meta, ``{}`` without a calibration."""
        return {} if self.calibration is None else {"calibration": self.calibration}

    def tie_facts(self, top_n: int | None = None) -> dict[str, Any]:
        """The precision and tie facts every rerank dialect reports (``RerankMeta``), with the
        winning chunks of the first ``top_n`` results (chunked reranking)."""
        return {"precision": self.precision, "scoring": self.scoring, "tie_groups": self.tie_groups,
                "tie_at_cutoff": bool(self.tie_at_cutoff), "rescored_ties": int(self.rescored),
                "cutoff_certified": self.cutoff_certified, "rescored_near_cutoff": int(self.near_rescored),
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


@dataclass(frozen=True)
class ScoreOutcome:
    """The scores of one request's documents (``Reranker.score``), in input order: ``scores`` float32
    (n,) (φ of the FP32 logits), ``keys`` float32 (n,) rank keys (HPS: the FP32 logit margin),
    ``truncated`` bool (n,) (cut to the model's max_length)."""

    scores: np.ndarray
    keys: np.ndarray
    truncated: np.ndarray

    @classmethod
    def joined(cls, parts: Sequence[ScoreOutcome]) -> ScoreOutcome:
        """The outcomes of consecutive parts of one request's documents, as one (none: no documents)."""
        return cls(scores=np.concatenate([np.zeros(0, np.float32), *(p.scores for p in parts)]),
                   keys=np.concatenate([np.zeros(0, np.float32), *(p.keys for p in parts)]),
                   truncated=np.concatenate([np.zeros(0, bool), *(p.truncated for p in parts)]))


@dataclass(frozen=True)
class EmbedOutcome:
    """The embeddings of one request's texts (``Embedder.embed``): ``vectors`` float32 (n, dim) unit
    rows in input order; ``tokens`` the texts' tokens after truncation, the prompt's included (None
    when not counted)."""

    vectors: np.ndarray
    tokens: int | None = None

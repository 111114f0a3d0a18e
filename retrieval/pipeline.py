"""The search pipeline — the one place a query becomes a served ranking (docs/ARCHITECTURE.md, "Search pipeline").

query → ``denoise`` (``off`` | ``rules`` | ``llm``, :mod:`retrieval.rewrite`) → ``embed`` (dense and
hybrid) → ``retrieve`` the top ``k_high`` candidates (dense | bm25 | hybrid) → ``dedup`` (optional:
near-duplicates among them suppressed, :mod:`retrieval.hygiene`) → ``rerank`` the first ``k_low``
→ ``route`` (dynamic K, :mod:`retrieval.routing`) → rerank up to the routed ``k`` → ``boost``
(optional: ``w`` · query-term overlap added to the rank keys, :mod:`retrieval.hygiene`) → served
order (:mod:`retrieval.ranking`: FP32 rank keys descending, equal keys in retrieval order, a tie
straddling ``top_n`` settled by FP32 re-scoring when the model offers it), then the candidates that
were not reranked, in retrieval order, then the suppressed near-duplicates, in retrieval order.

The reranker runs in two passes (the first ``k_low`` candidates, then the rest up to the routed
``k``), so a pointwise reranker's scores are the same whatever the route.

Stage names (seconds in :attr:`Ranked.timings`; the CLI's ``RUN.json`` and the server's
``meta.stages_ms`` use the same): ``denoise`` (when not ``off``), ``embed``, ``retrieve``, ``dedup``
(when on), ``rerank`` (both passes and boundary re-scoring), ``route``, ``boost`` (when on). Every
later stage sees the rewritten query. The retrieval-internal timings (``dense``, ``bm25``, ``fuse``,
…) stay in ``Ranked.candidates.timings``.

Model calls are async callables (:class:`SearchModels`): the ``Searcher`` deployment passes its
DeploymentHandle calls, :func:`local_models` wraps in-process models for the CLI (run it with
``asyncio.run``). This module never imports a model runtime.

Stored-vector reranking: when the reranker *is* the embedder (a bi-encoder with the embedder's
weights, precision and scoring; ``SearchModels.stored_vectors``), a candidate's score is the FP32
dot product of the query vector and the document vector the index stored at indexing time — the
cosine of the two unit vectors, exactly what re-embedding the document would give up to FP32
rounding — and no document is run through the model again (:func:`stored_vector_rows`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from steadyrank.retrieval.candidate_pool import CandidatePool
from steadyrank.retrieval.hygiene import (
    NO_HYGIENE,
    Hygiene,
    boosted_keys,
    query_term_overlap,
    suppress_near_duplicates,
)
from steadyrank.retrieval.modes import Mode
from steadyrank.retrieval.protocols import Embedder, Reranker
from steadyrank.retrieval.ranking import AsyncRescore, Cutoff, Ranking, rank_async
from steadyrank.retrieval.rewrite import DenoiseMode, LlmRewriter, Rewrite, rewrite_query
from steadyrank.retrieval.routing import (
    Route,
    RoutingDecision,
    RoutingSettings,
    RoutingSignals,
    compute_signals,
    decide,
)

if TYPE_CHECKING:
    from steadyrank.retrieval.index import Index
    from steadyrank.retrieval.search import Candidates


@dataclass(frozen=True)
class PassScores:
    """One rerank pass, in input order: ``scores`` (float32, φ of the logits) and ``keys`` (float32 rank keys)."""

    scores: np.ndarray
    keys: np.ndarray


EmbedQuery = Callable[[str], Awaitable[np.ndarray]]
Retrieve = Callable[[str, "np.ndarray | None", Mode, int, bool], Awaitable[CandidatePool]]
ScorePass = Callable[[str, list[str]], Awaitable[PassScores]]
Fp32Keys = Callable[[str, list[str]], Awaitable[np.ndarray]]


@dataclass(frozen=True)
class SearchModels:
    """The pipeline's model calls. ``retrieve(query, vector, mode, depth, with_vectors)``.
    ``score`` None: no reranker (retrieval order is served). ``fp32_keys`` None: a tie straddling
    ``top_n`` is reported, not settled. ``stored_vectors``: the reranker is the embedder; score from
    the stored vectors (module docstring) instead of calling ``score``. ``rewriter``: the chat model
    of ``denoise="llm"`` (None: that mode is refused). ``cutoff``: certify the top ``top_n`` set with
    ``fp32_keys`` (:class:`~retrieval.ranking.Cutoff`; None: exact ties only)."""

    retrieve: Retrieve
    embed: EmbedQuery | None = None
    score: ScorePass | None = None
    fp32_keys: Fp32Keys | None = None
    stored_vectors: bool = False
    rewriter: LlmRewriter | None = None
    cutoff: Cutoff | None = None


@dataclass(frozen=True)
class Ranked:
    """The served ranking of one query and how it came about.

    ``doc_ids``/``scores``: every candidate in served order; a reranked candidate's score is its rank
    key, the i-th candidate that was not reranked (i = 1, 2, …) gets ``min(keys) − i`` (float64), so
    sorting by score gives the served order. Without a reranker: the retrieval list and scores.
    ``rerank_scores``/``rerank_keys``: float32 of the first ``k`` candidates, in retrieval order.
    ``ranking``: the order of those ``k`` (input indices) and their tie facts. ``timings``: seconds
    per stage (module docstring); ``first_pass_s``: the ``k_low`` pass alone. ``query``: the original
    and rewritten query (:class:`~retrieval.rewrite.Rewrite`; None when :func:`rank_pool` ran alone).
    ``demoted``: the suppressed near-duplicates (id → its representative's id, retrieval order), served
    last and absent from ``candidates``. ``overlap``: the lexical boost's query-term overlap of the
    first ``k`` candidates (None when the boost is off); ``rerank_keys`` then hold the boosted keys.
    """

    doc_ids: list[str]
    scores: np.ndarray
    candidates: CandidatePool
    rerank_scores: np.ndarray
    rerank_keys: np.ndarray
    ranking: Ranking | None
    signals: RoutingSignals | None
    decision: RoutingDecision | None
    timings: dict[str, float]
    first_pass_s: float = 0.0
    query: Rewrite | None = None
    demoted: dict[str, str] = field(default_factory=dict)
    overlap: np.ndarray | None = None

    @property
    def k(self) -> int:
        """Candidates reranked."""
        return int(self.rerank_keys.size)

    def served(self) -> list[int]:
        """Indices into ``candidates`` of the reranked candidates, in served order."""
        return [] if self.ranking is None else self.ranking.order.tolist()


def serve_order(doc_ids: list[str], rank_keys: np.ndarray,
                order: Sequence[int] | np.ndarray | None = None) -> tuple[list[str], np.ndarray]:
    """Served list when the first ``len(rank_keys)`` of ``doc_ids`` were reranked.

    ``order``: the reranked indices by rank (default: keys descending, ties by retrieval order).
    Scores (float64): reranked candidates keep their rank key; the i-th candidate that was not
    reranked (i = 1, 2, …) gets ``min(keys) − i``. With no reranked candidate the retrieval order is
    served with scores −1, −2, ….
    """
    k = len(rank_keys)
    head = np.asarray(rank_keys, dtype=np.float64)
    by_rank = np.argsort(-head, kind="stable") if order is None else np.asarray(order, dtype=np.int64)
    floor = float(head.min()) if k else 0.0
    tail = floor - np.arange(1, len(doc_ids) - k + 1, dtype=np.float64)
    return [doc_ids[int(i)] for i in by_rank] + doc_ids[k:], np.concatenate([head[by_rank], tail])


def with_demoted(ranked: Ranked, demoted: dict[str, str], timings: dict[str, float],
                 query: Rewrite | None = None) -> Ranked:
    """``ranked`` with the suppressed near-duplicates ``demoted`` served last, in their order: the
    i-th (i = 1, 2, …) scores ``min(scores) − i`` (−i when nothing else is served); ``timings``
    (the stages before reranking) come first in the merged timings."""
    floor = float(np.min(ranked.scores)) if len(ranked.scores) else 0.0
    tail = floor - np.arange(1, len(demoted) + 1, dtype=np.float64)
    scores = np.concatenate([np.asarray(ranked.scores, dtype=np.float64), tail])
    return replace(ranked, doc_ids=ranked.doc_ids + list(demoted), scores=scores,
                   timings={**timings, **ranked.timings}, demoted=demoted, query=query or ranked.query)


async def deduplicate(pool: CandidatePool, threshold: float | None,
                      timings: dict[str, float]) -> tuple[CandidatePool, dict[str, str]]:
    """The ``dedup`` stage (:func:`retrieval.hygiene.suppress_near_duplicates`, on a worker thread):
    the kept pool and the demoted ids; the pool unchanged when ``threshold`` is None."""
    if threshold is None:
        return pool, {}
    started = time.perf_counter()
    found = await asyncio.to_thread(suppress_near_duplicates, pool, threshold)
    timings["dedup"] = time.perf_counter() - started
    return found.pool, found.demoted


async def rank_pool(
    query: str,
    pool: CandidatePool,
    score: ScoreRows,
    settings: RoutingSettings,
    route: Route = "dynamic",
    fp32_keys: Fp32Keys | None = None,
    boost_weight: float = 0.0,
    cutoff: Cutoff | None = None,
) -> Ranked:
    """Rerank ``pool`` for ``query`` under ``route`` (see :func:`retrieval.routing.decide`) with the
    passes ``score`` (:func:`model_rows` or :func:`stored_vector_rows`); ``boost_weight`` > 0 adds the
    lexical boost to the keys (:mod:`retrieval.hygiene`); a tie straddling ``settings.top_n`` is
    settled with ``fp32_keys`` when given (boosted alike; and, with ``cutoff``, every candidate near
    it: :func:`retrieval.ranking.rank`)."""
    timings: dict[str, float] = {}
    n = len(pool.doc_ids)
    texts = pool.texts[: min(settings.k_high, n)]
    low = min(settings.k_low, n)
    started = time.perf_counter()
    first = await score(0, low)
    first_pass_s = time.perf_counter() - started

    started = time.perf_counter()
    signals = compute_signals(
        settings,
        n_candidates=n,
        rerank_scores=first.scores,
        dense_scores=None if pool.dense is None else pool.dense.scores,
        dense_ids=None if pool.dense is None else pool.dense.doc_ids,
        sparse_ids=None if pool.sparse is None else pool.sparse.doc_ids,
        sparse_scores=None if pool.sparse is None else pool.sparse.scores,
    )
    decision = decide(signals, settings, route)
    timings["route"] = time.perf_counter() - started

    started = time.perf_counter()
    scores, keys = first.scores, first.keys
    if decision.k_rerank > low:
        second = await score(low, decision.k_rerank)
        scores, keys = np.concatenate([scores, second.scores]), np.concatenate([keys, second.keys])
    rerank_s = first_pass_s + time.perf_counter() - started

    overlap = None
    if boost_weight > 0:
        started = time.perf_counter()
        overlap = await asyncio.to_thread(query_term_overlap, query, texts[: keys.size])
        keys = boosted_keys(keys, overlap, boost_weight)
        timings["boost"] = time.perf_counter() - started

    started = time.perf_counter()
    rescore = None if fp32_keys is None else _rescorer(fp32_keys, query, texts, overlap, boost_weight)
    ranking = await rank_async(keys, settings.top_n, rescore, cutoff)
    timings["rerank"] = rerank_s + time.perf_counter() - started
    doc_ids, served = serve_order(pool.doc_ids, keys, ranking.order)
    return Ranked(doc_ids, served, pool, scores, keys, ranking, signals, decision, timings, first_pass_s,
                  overlap=overlap)


async def search(query: str, mode: Mode, models: SearchModels, settings: RoutingSettings,
                 route: Route = "dynamic", denoise: DenoiseMode = "off", hygiene: Hygiene = NO_HYGIENE) -> Ranked:
    """One query end to end (module docstring): denoise, embed, retrieve ``settings.k_high``, the
    ``hygiene`` stages that are on, rerank, route. A boost without a reranker, or suppression over
    more candidates than it compares, is refused before any work."""
    hygiene.check_depth(settings.k_high)
    if hygiene.boost_on and models.score is None:
        raise ValueError("the lexical boost adds to rank keys: it needs a reranker")
    timings: dict[str, float] = {}
    started = time.perf_counter()
    rewrite = await rewrite_query(query, denoise, models.rewriter)  # rules: on a worker thread
    if denoise != "off":
        timings["denoise"] = time.perf_counter() - started
    query = rewrite.rewritten
    vector = None
    stored = models.stored_vectors and models.score is not None
    if mode != "bm25" or stored:
        if models.embed is None:
            raise ValueError(f"mode {mode!r} needs a query embedder")
        started = time.perf_counter()
        vector = await models.embed(query)
        timings["embed"] = time.perf_counter() - started
    started = time.perf_counter()
    pool = await models.retrieve(query, vector, mode, settings.k_high, stored or hygiene.dedup_threshold is not None)
    timings["retrieve"] = time.perf_counter() - started
    pool, demoted = await deduplicate(pool, hygiene.dedup_threshold, timings)
    if models.score is None:
        empty = np.zeros(0, dtype=np.float32)
        retrieved = Ranked(pool.doc_ids, pool.scores, pool, empty, empty, None, None, None, {})
        return with_demoted(retrieved, demoted, timings, rewrite)
    score = stored_vector_rows(vector, pool) if stored and vector is not None else model_rows(models.score, query, pool)
    ranked = await rank_pool(query, pool, score, settings, route, models.fp32_keys, hygiene.boost_weight,
                             models.cutoff)
    return with_demoted(ranked, demoted, timings, rewrite)


#: Scores of the candidates ``pool[start:stop]`` (one rerank pass).
ScoreRows = Callable[[int, int], Awaitable[PassScores]]


def model_rows(score: ScorePass, query: str, pool: CandidatePool) -> ScoreRows:
    """Rerank passes through the reranker: ``score(query, texts of the rows)``."""
    texts = pool.texts

    async def rows(start: int, stop: int) -> PassScores:
        return await _pass(score, query, texts[start:stop])

    return rows


def stored_vector_rows(query_vector: np.ndarray, pool: CandidatePool) -> ScoreRows:
    """Rerank passes from the pool's stored vectors: score = key = ``Σ_j q_j d_j`` in float32 (the
    cosine of unit vectors; module docstring)."""
    vectors = pool.vectors
    if vectors is None:
        raise ValueError("stored-vector reranking needs the candidates' vectors (retrieve with_vectors)")
    query = np.asarray(query_vector, dtype=np.float32)

    async def rows(start: int, stop: int) -> PassScores:
        keys = (vectors[start:stop] @ query).astype(np.float32)
        return PassScores(keys, keys)

    return rows


async def _pass(score: ScorePass, query: str, texts: list[str]) -> PassScores:
    if not texts:
        empty = np.zeros(0, dtype=np.float32)
        return PassScores(empty, empty)
    out = await score(query, texts)
    scores, keys = np.asarray(out.scores, dtype=np.float32), np.asarray(out.keys, dtype=np.float32)
    if scores.shape != (len(texts),) or keys.shape != (len(texts),):
        raise ValueError(f"reranker returned {scores.shape} scores and {keys.shape} keys for {len(texts)} documents")
    return PassScores(scores, keys)


def local_models(store: Index, embedder: Embedder | None, reranker: Reranker | None, *,
                 rrf_k: float, rrf_weights: tuple[float, float], stored_vectors: bool = False,
                 rewriter: LlmRewriter | None = None, cutoff: Cutoff | None = None) -> SearchModels:
    """:class:`SearchModels` over in-process models (the CLI): the store retrieves, ``embedder``
    embeds the query, ``reranker`` scores pairs (and re-scores a boundary tie in FP32 when its
    ``rescores_boundary_ties`` says so); ``stored_vectors``, ``rewriter`` and ``cutoff`` as in
    :class:`SearchModels`."""

    async def retrieve(query: str, vector: np.ndarray | None, mode: Mode, depth: int,
                       with_vectors: bool) -> CandidatePool:
        found = store.search(query, mode=mode, depth=depth, rrf_k=rrf_k, rrf_weights=rrf_weights, vector=vector)
        return CandidatePool.from_store(store, found, with_vectors)

    return SearchModels(retrieve=retrieve, embed=None if embedder is None else _local_embed(embedder),
                        score=None if reranker is None else _local_score(reranker),
                        fp32_keys=None if reranker is None else _local_fp32_keys(reranker),
                        stored_vectors=stored_vectors, rewriter=rewriter, cutoff=cutoff)


def _local_embed(embedder: Embedder) -> EmbedQuery:
    async def embed(query: str) -> np.ndarray:
        return embedder.encode([query], prompt=embedder.query_prompt)[0]

    return embed


def _local_score(reranker: Reranker) -> ScorePass:
    async def score(query: str, texts: list[str]) -> PassScores:
        out = reranker.score([(query, t) for t in texts])
        return PassScores(out.scores, out.keys)

    return score


def _local_fp32_keys(reranker: Reranker) -> Fp32Keys | None:
    """The reranker's FP32 keys, where its ``rescores_boundary_ties`` says a boundary tie is settled."""
    if not reranker.rescores_boundary_ties:
        return None

    async def fp32_keys(query: str, texts: list[str]) -> np.ndarray:
        return reranker.fp32_keys([(query, t) for t in texts])

    return fp32_keys


def _rescorer(fp32_keys: Fp32Keys, query: str, texts: list[str], overlap: np.ndarray | None = None,
              boost_weight: float = 0.0) -> AsyncRescore:
    """FP32 keys of the candidates at ``indices`` (the settling of a tie at the cutoff), plus
    ``boost_weight · overlap`` (float64) when the lexical boost is on."""

    async def rescore(indices: np.ndarray) -> np.ndarray:
        fine = await fp32_keys(query, [texts[i] for i in indices])
        if overlap is None:
            return fine
        return np.asarray(fine, dtype=np.float64) + boost_weight * overlap[indices]

    return rescore


def rerank_candidates(
    store: Index,
    query: str,
    candidates: Candidates,
    reranker: Reranker,
    settings: RoutingSettings,
    route: Route = "dynamic",
    hygiene: Hygiene = NO_HYGIENE,
) -> Ranked:
    """:func:`rank_pool` run synchronously over in-process models, for already retrieved
    ``candidates``, with the ``hygiene`` stages that are on (as :func:`search` runs them)."""
    hygiene.check_depth(len(candidates.doc_ids))
    pool = CandidatePool.from_store(store, candidates, with_vectors=hygiene.dedup_threshold is not None)

    async def run() -> Ranked:
        timings: dict[str, float] = {}
        kept, demoted = await deduplicate(pool, hygiene.dedup_threshold, timings)
        ranked = await rank_pool(query, kept, model_rows(_local_score(reranker), query, kept), settings, route,
                                 _local_fp32_keys(reranker), hygiene.boost_weight)
        return with_demoted(ranked, demoted, timings)

    return asyncio.run(run())


def latency_summary(timings: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per stage over queries: ``p50_ms``, ``p95_ms``, ``mean_ms`` and ``n`` (queries that ran the stage).

    Percentiles by linear interpolation (numpy's default); seconds converted to milliseconds.
    """
    stages = sorted({stage for t in timings for stage in t})
    out: dict[str, dict[str, float]] = {}
    for stage in stages:
        values = np.array([t[stage] for t in timings if stage in t]) * 1000.0
        out[stage] = {
            "p50_ms": float(np.percentile(values, 50)),
            "p95_ms": float(np.percentile(values, 95)),
            "mean_ms": float(values.mean()),
            "n": int(values.size),
        }
    return out

"""One query end to end: retrieve, rerank ``k_low``, route, maybe rerank up to ``k_high``.

The reranker runs in two passes (the first ``k_low`` candidates, then the rest up to the routed
``k``), so a pointwise reranker's scores are the same whatever the route, and each pass is timed.
The served order: reranked candidates by reranker score descending (equal scores keep retrieval
order), then the candidates that were not reranked, in retrieval order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from steadyrank.retrieval.protocols import Reranker
from steadyrank.retrieval.routing import Route, RoutingDecision, RoutingSettings, RoutingSignals, compute_signals, decide
from steadyrank.retrieval.store import Candidates, IndexStore


@dataclass(frozen=True)
class Ranked:
    """The served ranking of one query and how it came about.

    ``rerank_scores``: float32 reranker scores of the first ``decision.k_rerank`` candidates, in
    retrieval order. ``timings``: seconds per stage — the retrieval stages of ``candidates`` plus
    ``rerank_low``, ``route`` and, when escalated, ``rerank_high``.
    """

    doc_ids: list[str]
    scores: np.ndarray
    candidates: Candidates
    rerank_scores: np.ndarray
    signals: RoutingSignals
    decision: RoutingDecision
    timings: dict[str, float]


def serve_order(doc_ids: list[str], rerank_scores: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Served list when the first ``len(rerank_scores)`` of ``doc_ids`` were reranked.

    Scores (float64): reranked candidates keep their reranker score; the i-th candidate that was
    not reranked (i = 1, 2, …) gets ``min(reranker scores) − i`` so the score order is the served
    order. With no reranked candidate the retrieval order is served with scores −1, −2, ….
    """
    k = len(rerank_scores)
    head = np.asarray(rerank_scores, dtype=np.float64)
    order = np.argsort(-head, kind="stable")
    floor = float(head.min()) if k else 0.0
    tail = floor - np.arange(1, len(doc_ids) - k + 1, dtype=np.float64)
    return [doc_ids[i] for i in order] + doc_ids[k:], np.concatenate([head[order], tail])


def rerank_candidates(
    store: IndexStore,
    query: str,
    candidates: Candidates,
    reranker: Reranker,
    settings: RoutingSettings,
    route: Route = "dynamic",
) -> Ranked:
    """Rerank ``candidates`` for ``query`` under ``route`` (see :func:`retrieval.routing.decide`)."""
    timings = dict(candidates.timings)
    n = len(candidates.doc_ids)
    texts = [store.document(d).full_text for d in candidates.doc_ids[: min(settings.k_high, n)]]
    low = min(settings.k_low, n)
    started = time.perf_counter()
    first = _scores(reranker, query, texts[:low])
    timings["rerank_low"] = time.perf_counter() - started
    started = time.perf_counter()
    signals = compute_signals(
        settings,
        n_candidates=n,
        rerank_scores=first,
        dense_scores=None if candidates.dense is None else candidates.dense.scores,
        dense_ids=None if candidates.dense is None else candidates.dense.doc_ids,
        sparse_ids=None if candidates.sparse is None else candidates.sparse.doc_ids,
        sparse_scores=None if candidates.sparse is None else candidates.sparse.scores,
    )
    decision = decide(signals, settings, route)
    timings["route"] = time.perf_counter() - started
    scores = first
    if decision.k_rerank > low:
        started = time.perf_counter()
        second = _scores(reranker, query, texts[low : decision.k_rerank])
        timings["rerank_high"] = time.perf_counter() - started
        scores = np.concatenate([first, second])
    doc_ids, served = serve_order(candidates.doc_ids, scores)
    return Ranked(doc_ids, served, candidates, scores, signals, decision, timings)


def _scores(reranker: Reranker, query: str, texts: list[str]) -> np.ndarray:
    """Reranker scores in input order (no ``top_n``: the order is ours, ties are kept as a signal)."""
    if not texts:
        return np.zeros(0, dtype=np.float32)
    scores = np.asarray(reranker.rerank(query, texts).scores, dtype=np.float32)
    if scores.shape != (len(texts),):
        raise ValueError(f"reranker returned {scores.shape} scores for {len(texts)} documents")
    return scores


def latency_summary(timings: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per stage over queries: ``p50_ms``, ``p95_ms``, ``mean_ms`` and ``n`` (queries that ran the stage).

    Percentiles by linear interpolation (numpy's default); seconds converted to milliseconds.
    """
    stages = sorted({stage for t in timings for stage in t})
    out = {}
    for stage in stages:
        values = np.array([t[stage] for t in timings if stage in t]) * 1000.0
        out[stage] = {
            "p50_ms": float(np.percentile(values, 50)),
            "p95_ms": float(np.percentile(values, 95)),
            "mean_ms": float(values.mean()),
            "n": int(values.size),
        }
    return out

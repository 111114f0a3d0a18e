"""Scatter-gather over the shards of a sharded index: each shard's answer, the exact merge, and the
async gather with its deadline.

Exact merge. Every shard answers its own top ``depth`` (dense, BM25, or both for hybrid); the
gathered lists are merged by score descending, equal scores by ``seq`` ascending (the document's
corpus-wide insertion number, which is its slot in the equivalent unsharded index), cut to
``depth``. The global top ``depth`` is always inside the union of the shards' top ``depth``, so for
Flat (and for BM25) the merged list equals the unsharded index's — ids, scores and order. BM25
scores equal the unsharded ones because every shard is scored with the corpus-wide N, df and avgdl
(:class:`~steadyrank.retrieval.bm25.Bm25Stats`); hybrid fuses the merged lists with the same RRF.
Approximate indexes (HNSW, IVF) are merged the same way; their recall is that of each shard.

Deadlines. :func:`scatter_gather` waits ``timeout_s`` for all shards; a shard that fails or does not
answer in time raises :class:`ShardsIncomplete`, or with ``partial_ok`` the others' answers are
merged and the missing shards reported — documents are never dropped silently.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from steadyrank.retrieval.candidate_pool import CandidatePool
from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.fusion import DEFAULT_RRF_K
from steadyrank.retrieval.modes import Mode
from steadyrank.retrieval.search import Candidates, Hits, final_candidates
from steadyrank.retrieval.store import IndexStore


class ShardsIncomplete(RuntimeError):
    """A scatter-gather lacks a shard's answer (it failed or missed its deadline) and partial results
    are not allowed (the server answers it with :class:`steadyrank.serve.errors.ShardUnavailable`, 503)."""


@dataclass(frozen=True)
class ShardHits:
    """One shard's ranked list: ids best first, their scores and their corpus-wide ``seqs``."""

    doc_ids: list[str]
    scores: np.ndarray
    seqs: list[int]


@dataclass(frozen=True)
class ShardAnswer:
    """One shard's answer to a search: its dense and/or BM25 top lists, the documents they name
    (for display and reranking), the shard's ``timings`` (s) and, when asked for, the documents'
    stored float32 ``vectors`` (stored-vector reranking, :mod:`retrieval.pipeline`)."""

    dense: ShardHits | None
    sparse: ShardHits | None
    documents: dict[str, Document]
    timings: dict[str, float] = field(default_factory=dict)
    vectors: dict[str, np.ndarray] | None = None


def merge_hits(parts: Sequence[ShardHits], depth: int) -> ShardHits:
    """The top ``depth`` of the union: score descending, equal scores by ``seq`` ascending."""
    ids = [i for p in parts for i in p.doc_ids]
    seqs = [q for p in parts for q in p.seqs]
    dtype = parts[0].scores.dtype if parts else np.float32
    scores = np.concatenate([np.asarray(p.scores, dtype=dtype) for p in parts]) if parts else np.zeros(0, dtype)
    order = np.lexsort((np.asarray(seqs, dtype=np.int64), -scores))[:depth]
    return ShardHits([ids[i] for i in order], scores[order], [seqs[i] for i in order])


@dataclass(frozen=True)
class Gathered:
    """Merged candidates plus what came back: ``documents`` (and ``vectors`` when asked for) of
    every candidate and the ``missing`` shards (non-empty only with partial results allowed)."""

    candidates: Candidates
    documents: dict[str, Document]
    missing: dict[int, str]
    vectors: dict[str, np.ndarray] | None = None

    @property
    def partial(self) -> bool:
        return bool(self.missing)

    def pool(self) -> CandidatePool:
        """The merged candidates as the pipeline's :class:`~retrieval.candidate_pool.CandidatePool`."""
        found = self.candidates
        vectors = None
        if self.vectors is not None:
            vectors = np.asarray([self.vectors[i] for i in found.doc_ids], dtype=np.float32)
        return CandidatePool(list(found.doc_ids), np.asarray(found.scores, dtype=np.float64),
                             [self.documents[i] for i in found.doc_ids], found.dense, found.sparse,
                             dict(found.timings), vectors, tuple(sorted(self.missing)))


def merge_answers(
    answers: Sequence[ShardAnswer], mode: Mode, depth: int, *, rrf_k: float = DEFAULT_RRF_K,
    rrf_weights: tuple[float, float] = (1.0, 1.0),
) -> tuple[Candidates, dict[str, Document]]:
    """Merge the shards' component lists (:func:`merge_hits`) and derive the mode's final list."""
    timings: dict[str, float] = {}
    for answer in answers:
        for stage, seconds in answer.timings.items():
            timings[stage] = max(timings.get(stage, 0.0), seconds)
    dense = sparse = None
    if mode in ("dense", "hybrid"):
        merged = merge_hits([a.dense for a in answers if a.dense is not None], depth)
        dense = Hits(merged.doc_ids, merged.scores)
    if mode in ("bm25", "hybrid"):
        merged = merge_hits([a.sparse for a in answers if a.sparse is not None], depth)
        sparse = Hits(merged.doc_ids, merged.scores)
    found = final_candidates(mode, dense, sparse, depth, rrf_k, rrf_weights, timings)
    documents: dict[str, Document] = {}
    for answer in answers:
        documents.update(answer.documents)
    return found, documents


async def scatter_gather(
    calls: Sequence[Callable[[], Awaitable[ShardAnswer]]],
    *,
    mode: Mode,
    depth: int,
    timeout_s: float,
    partial_ok: bool = False,
    rrf_k: float = DEFAULT_RRF_K,
    rrf_weights: tuple[float, float] = (1.0, 1.0),
) -> Gathered:
    """Call every shard at once (``calls[i]()`` answers for shard i), wait at most ``timeout_s``,
    merge exactly. A shard that raises or misses the deadline (not done by then, or ended by a
    deadline of its own: ``TimeoutError``) raises :class:`ShardsIncomplete` naming it, unless
    ``partial_ok`` (then it is listed in ``Gathered.missing``; all missing still raises)."""
    if not calls:
        raise ValueError("no shards to search")
    tasks = [asyncio.ensure_future(call()) for call in calls]
    _, pending = await asyncio.wait(tasks, timeout=timeout_s)
    for task in pending:
        task.cancel()
    missing: dict[int, str] = {}
    answers: list[ShardAnswer] = []
    for i, task in enumerate(tasks):
        failure = None if task in pending else task.exception()
        if task in pending or isinstance(failure, TimeoutError):
            missing[i] = f"no answer within {timeout_s:g} s"
        elif failure is not None:
            missing[i] = f"{type(failure).__name__}: {failure}"
        else:
            answers.append(task.result())
    if missing and (not partial_ok or not answers):
        detail = "; ".join(f"shard {i}: {why}" for i, why in sorted(missing.items()))
        raise ShardsIncomplete(f"{len(missing)} of {len(calls)} shards did not answer ({detail})")
    found, documents = merge_answers(answers, mode, depth, rrf_k=rrf_k, rrf_weights=rrf_weights)
    vectors: dict[str, np.ndarray] | None = None
    if answers and all(a.vectors is not None for a in answers):
        vectors = {i: v for a in answers if a.vectors is not None for i, v in a.vectors.items()}
    return Gathered(found, {i: documents[i] for i in found.doc_ids}, missing, vectors)


def answer_from_store(
    store: IndexStore, query: str, *, mode: Mode, depth: int, vector: np.ndarray | None = None,
    with_vectors: bool = False,
) -> ShardAnswer:
    """One shard's :class:`ShardAnswer` from its store (the component lists of ``mode``;
    ``with_vectors``: with the stored vectors of the documents named)."""
    found = store.search(query, mode=mode, depth=depth, vector=vector)

    def hits(h: Hits | None) -> ShardHits | None:
        return None if h is None else ShardHits(list(h.doc_ids), np.asarray(h.scores), [store.seq(i) for i in h.doc_ids])

    named = sorted(set(found.dense.doc_ids if found.dense else ()) | set(found.sparse.doc_ids if found.sparse else ()))
    vectors = dict(zip(named, store.vectors(named), strict=True)) if with_vectors else None
    return ShardAnswer(hits(found.dense), hits(found.sparse), {i: store.document(i) for i in named},
                       dict(found.timings), vectors)

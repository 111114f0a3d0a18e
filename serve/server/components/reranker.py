"""``Reranker`` (and ``CanaryReranker``, the same class): a scoring model with HPS and tie facts.

``score(query, docs, shadow=False)`` → FP32 scores, rank keys and truncation flags;
``rerank(query, docs, top_n)`` → the full ranking with tie facts; ``fp32_keys(query, docs,
shadow=False)`` for boundary re-scoring. Each takes a request's ``instruction`` (None: the model's
own; refused by a model that takes none, by the runtime's ``score_many`` before any forward pass).
Callers are trusted: the HTTP edge checked every request (docs/ARCHITECTURE.md, "Where input is
validated"), and the Searcher and the evaluator send texts of the index. The user requests of a batch run in one compute-thread
call, each with its own forward plan (bitwise-stable scores); shadow work (``shadow=True``) runs
in small chunks behind user work (:mod:`serve.server.admission.shadow`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict
from typing import Any

import numpy as np

from steadyrank.retrieval.ranking import rank_async
from steadyrank.serve.errors import InvalidInputError
from steadyrank.serve.runtime.chunking import aggregate_max
from steadyrank.serve.server.admission.deadline import Ticket
from steadyrank.serve.server.admission.shadow import ShadowGate, chunks
from steadyrank.serve.server.calls import Deadline, RerankOutcome, ScoreOutcome, Variant
from steadyrank.serve.server.components.batcher import RequestBatcher
from steadyrank.serve.server.components.common import (
    admitted,
    apply_batch_config,
    model_executor,
    run_batch,
    run_in,
    set_compute_threads,
    shadow_turn,
)
from steadyrank.serve.settings import Settings, load_settings
from steadyrank.serve.telemetry import Recorder


class Reranker:
    """A scoring model (cross-encoder, causal-LM reranker or bi-encoder).

    ``role`` is ``primary`` (serves users) or ``canary`` (shadow copies); it only labels metrics.
    """

    def __init__(self, settings: Settings | dict, model: Any, role: Variant, hub: Any) -> None:
        from steadyrank.serve.runtime import ModelSettings, load_scorer
        from steadyrank.serve.runtime.precision_calibration import CACHE_FILE
        from steadyrank.serve.runtime.score_calibration import served_calibration

        settings = load_settings(settings)
        options = settings.deployments.reranker if role == "primary" else settings.deployments.canary_reranker
        set_compute_threads(options.torch_threads, options.forward_lanes)
        # precision auto of a cross-encoder: measured once per model and machine, cached beside the index
        model_settings = ModelSettings.model_validate(model)
        self.scorer = load_scorer(model_settings, calibration=settings.cache_path() / CACHE_FILE)
        # calibrated scores: refused here too when fitted on another model (settings.check_files refuses first)
        self.calibration = served_calibration(model_settings, self.scorer.model_id)
        self.executor = model_executor(settings.deployments.background_niceness)
        self._batch = RequestBatcher(self._run_batch)  # limits from user_config (reconfigure)
        self.role = role
        self.label = "reranker" if role == "primary" else "canary_reranker"
        admission = settings.admission
        self.gate = ShadowGate(admission.shadow_idle_s, admission.shadow_max_wait_s)
        self.shadow_chunk_docs = admission.shadow_chunk_docs
        self._twin_lock = threading.Lock()
        self.recorder = Recorder(hub, flush_interval_s=settings.telemetry.flush_interval_s)

    def reconfigure(self, config: dict[str, Any]) -> None:
        apply_batch_config(self._batch, config)

    async def info(self) -> dict[str, Any]:
        from steadyrank.serve.runtime.lanes import lane_shape

        s = self.scorer
        lanes, threads_per_lane = lane_shape()
        return {"model": s.model_id, "kind": s.kind, "precision": s.precision,
                "precision_choice": s.precision_choice.facts(), "scoring": s.scoring,
                "max_length": s.settings.max_length, "role": self.role,
                "rescore_boundary_ties": s.rescores_boundary_ties, "forward_lanes": lanes,
                "cutoff": None if s.cutoff is None else {"margin": s.cutoff.margin,
                                                         "max_rescore": s.cutoff.max_rescore},
                "error_bound": None if s.error_bound is None else asdict(s.error_bound),
                "torch_threads_per_lane": threads_per_lane, **s.input_room().facts()}

    async def score(self, query: str, documents: list[str], shadow: bool = False,
                    deadline: Deadline | None = None, instruction: str | None = None) -> ScoreOutcome:
        """A :class:`~serve.server.calls.ScoreOutcome`: ``scores``, ``keys`` float32 (n,) and
        ``truncated`` bool (n,), in input order.

        ``deadline``: a user request still queued when it passes (or whose caller gave
        up) is dropped before its forward pass (``DeadlineExceeded``; counted).

        ``shadow`` (evaluator traffic): scored in chunks of ``admission.shadow_chunk_docs`` documents,
        each started only when user work leaves room (:class:`~serve.server.admission.shadow.ShadowGate`).
        In FP32 the scores equal those of the user path up to FP32 rounding; below FP32 a
        document's logit may differ in its last bits, as it does between user batches.
        """
        if not documents:
            return ScoreOutcome.joined([])
        if shadow:
            return ScoreOutcome.joined([(await self._shadow_turn(self._score_jobs, [(query, list(part), instruction)]))[0]
                                        for part in chunks(documents, self.shadow_chunk_docs)])
        async with self.gate.user():
            return await admitted(self._batch, (query, documents, instruction), Ticket(deadline), self.recorder,
                                  self.label)

    async def fp32_keys(self, query: str, documents: list[str], shadow: bool = False,
                        instruction: str | None = None) -> np.ndarray:
        """Rank keys of ``documents`` from an FP32 forward pass (boundary re-scoring); ``shadow`` as
        in :meth:`score` (one chunk: a tie group is small)."""
        if shadow:
            return await self._shadow_turn(self._fp32_keys, query, documents, instruction)
        async with self.gate.user():
            return await run_in(self.executor, self._fp32_keys, query, documents, instruction)

    async def _shadow_turn(self, fn: Any, *args: Any) -> Any:
        return await shadow_turn(self.gate, self.recorder, self.label, self.executor, fn, *args)

    def _fp32_keys(self, query: str, documents: list[str], instruction: str | None) -> np.ndarray:
        with self._twin_lock:  # the FP32 twin is loaded once, lazily
            return self.scorer.fp32_keys([(query, d) for d in documents], instruction)

    async def rerank(self, query: str, documents: list[str], top_n: int | None = None, record: bool = True,
                     deadline: Deadline | None = None, instruction: str | None = None,
                     chunks: list[int] | None = None) -> RerankOutcome:
        """The ranking of ``documents`` for ``query`` (:func:`retrieval.ranking.rank`) as a
        :class:`~serve.server.calls.RerankOutcome`. ``record`` = count it as user traffic in the metrics.

        ``chunks`` (chunked reranking): ``documents`` are the chunks of ``len(chunks)`` documents,
        ``chunks[d]`` of document d, in document order. Each chunk is scored (HPS), a document's rank
        key is the largest of its chunks' FP32 keys (:func:`serve.runtime.chunking.aggregate_max`),
        and a tie straddling ``top_n`` is re-scored in FP32 over every chunk of the tied documents
        and aggregated alike. The outcome is about the documents; it names each one's winning chunk.
        """
        started = time.perf_counter()
        counts = check_chunk_counts(chunks, len(documents))
        scored = await self.score(query, documents, deadline=deadline, instruction=instruction)
        starts = np.concatenate([[0], np.cumsum(counts[:-1])]).astype(np.int64)
        keys, winners = aggregate_max(scored.keys, counts)
        scores = scored.scores[starts + winners]
        truncated = np.logical_or.reduceat(scored.truncated, starts)

        async def rescore(indices: np.ndarray) -> np.ndarray:
            rows = [int(starts[d]) + k for d in indices for k in range(int(counts[d]))]
            fine = await self.fp32_keys(query, [documents[r] for r in rows], instruction=instruction)
            return aggregate_max(fine, [int(counts[d]) for d in indices])[0]

        ranking = await rank_async(keys, top_n, rescore if self.scorer.rescores_boundary_ties else None,
                                   self.scorer.cutoff)
        result = RerankOutcome(
            scores=scores, order=[int(i) for i in ranking.order],
            tie_groups=[g.tolist() for g in ranking.tie_groups], tie_at_cutoff=bool(ranking.tie_at_cutoff),
            tie_group_size_at_cutoff=int(ranking.tie_group_size_at_cutoff), rescored=int(ranking.rescored),
            near_rescored=int(ranking.near_rescored), cutoff_certified=ranking.certified,
            truncated=np.flatnonzero(truncated).tolist(), model=self.scorer.model_id,
            precision=self.scorer.precision, scoring=self.scorer.scoring,
            winners=None if chunks is None else winners.tolist(), chunks=None if chunks is None else list(counts),
            **({} if self.calibration is None else {"calibrated": self.calibration.apply(keys),
                                                    "calibration": self.calibration.facts()}))
        if record:
            rec = self.recorder
            rec.observe("steadyrank_stage_duration_seconds", time.perf_counter() - started, stage="rerank")
            rec.observe("steadyrank_candidates_reranked", len(counts))
            record_ties(rec, ranking.tie_group_size_at_cutoff, ranking.rescored)
            record_cutoff(rec, ranking.certified, ranking.near_rescored)
        return result

    async def _run_batch(self, jobs: list[tuple[tuple[str, list[str], str | None], Ticket]]) -> list[Any]:
        self.recorder.observe("steadyrank_batch_size", len(jobs), deployment=self.label)
        return await run_batch(self.executor, jobs, self._score_jobs, self.recorder, self.label)

    def _score_jobs(self, jobs: list[tuple[str, list[str], str | None]]) -> list[ScoreOutcome]:
        """One forward plan per job, all in this one compute-thread call (the jobs' batches share
        the forward lanes, :meth:`Scorer.score_many`): a request's scores depend on its own pairs
        only, never on what else was in flight (rows of other requests would change the padded
        shapes, and with them the last bits of FP32 results)."""
        scored = self.scorer.score_many([[(query, doc) for doc in docs] for query, docs, _ in jobs],
                                        [instruction for _, _, instruction in jobs])
        return [ScoreOutcome(s.scores, s.keys, s.truncated) for s in scored]


def check_chunk_counts(chunks: list[int] | None, n: int) -> list[int]:
    """Chunks per document: ``chunks`` (each ≥ 1, summing to the ``n`` texts sent), or one text per
    document when None."""
    if chunks is None:
        return [1] * n
    if not isinstance(chunks, list) or not all(isinstance(c, int) and c >= 1 for c in chunks) or sum(chunks) != n:
        raise InvalidInputError(f"chunks must be positive counts summing to the {n} texts sent")
    return chunks


def record_ties(recorder: Recorder, straddling_size: int, rescored: int) -> None:
    """Tie metrics of one user ranking: the group straddling the cutoff and its re-scoring."""
    if straddling_size:
        recorder.inc("steadyrank_ties_at_cutoff_total")
        recorder.observe("steadyrank_tie_group_size_at_cutoff", straddling_size)
    if rescored:
        recorder.inc("steadyrank_rescored_ties_total", rescored)


def record_cutoff(recorder: Recorder, certified: bool | None, near_rescored: int) -> None:
    """Certified-cutoff metrics of one user ranking (nothing where certification is not in force)."""
    if certified is None:
        return
    recorder.inc("steadyrank_cutoff_checks_total")
    if not certified:
        recorder.inc("steadyrank_cutoff_uncertified_total")
    if near_rescored:
        recorder.inc("steadyrank_cutoff_rescored_total", near_rescored)

"""``Searcher``: runs the search pipeline (:mod:`retrieval.pipeline`) over the model deployments' handles."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from pydantic import ValidationError

from steadyrank.retrieval.modes import Mode
from steadyrank.retrieval.pipeline import CandidatePool, PassScores, Ranked, SearchModels, search
from steadyrank.retrieval.ranking import Cutoff
from steadyrank.retrieval.rewrite import LlmRewriter
from steadyrank.retrieval.routing import Route
from steadyrank.serve import tracing
from steadyrank.serve.errors import InvalidInputError
from steadyrank.serve.runtime.score_calibration import ServedCalibration, served_calibration
from steadyrank.serve.server.calls import SearchCall, SearchOutcome
from steadyrank.serve.server.components.reranker import record_cutoff, record_ties
from steadyrank.serve.settings import Settings, load_settings
from steadyrank.serve.telemetry import Recorder


class Searcher:
    """``search(call)`` → :class:`~serve.server.calls.SearchOutcome`; the pipeline's model calls are
    the Embedder, Retriever and (primary or canary) Reranker handles."""

    def __init__(self, settings: Settings | dict, embedder: Any, retriever: Any, reranker: Any,
                 canary: Any, hub: Any) -> None:
        settings = load_settings(settings)
        self.settings = settings
        self.policy = settings.routing_policy()
        self.route: Route = settings.routing.route
        self.embedder, self.retriever = embedder, retriever
        self.rerankers = {"primary": reranker, "canary": canary}
        models = {"primary": settings.reranker_model, "canary": settings.canary}
        self.rescore_on = {v: m is not None and m.rescores_boundary_ties for v, m in models.items()}
        # the primary reranker is the embedder: rerank from the index's stored vectors
        self.stored_vectors = {"primary": settings.reranker_model.same_vectors(settings.embedder), "canary": False}
        self.facts: dict[str, dict[str, Any]] = {}
        self.models = models
        self.calibrations: dict[str, ServedCalibration | None] = {}
        llm = settings.search.denoise_llm
        self.rewriter = None if llm is None else LlmRewriter(llm.rewriter_settings())
        self.recorder = Recorder(hub, flush_interval_s=settings.telemetry.flush_interval_s)

    async def _facts(self, variant: str) -> dict[str, Any]:
        if variant not in self.facts:
            self.facts[variant] = await self.rerankers[variant].info.remote()
        return self.facts[variant]

    def _calibration(self, variant: str, served_model_id: str) -> ServedCalibration | None:
        """The variant's score calibration checked against the model its reranker serves (read once)."""
        if variant not in self.calibrations:
            model = self.models[variant]
            self.calibrations[variant] = None if model is None else served_calibration(model, served_model_id)
        return self.calibrations[variant]

    async def ready(self) -> dict[str, Any]:
        """Model and index facts of every component (raises if one is not reachable)."""
        checks = {
            "embedder": self.embedder.info.remote(),
            "retriever": self.retriever.info.remote(),
            "reranker": self.rerankers["primary"].info.remote(),
        }
        if self.rerankers["canary"] is not None:
            checks["canary_reranker"] = self.rerankers["canary"].info.remote()
        return {name: await response for name, response in checks.items()}

    def _models(self, call: SearchCall, facts: dict[str, Any]) -> SearchModels:
        """The pipeline's calls for ``call``; ``facts``: the reranker's ``info`` (its certified cutoff)."""
        reranker = self.rerankers[call.variant]
        cutoff = facts.get("cutoff")

        async def embed(query: str) -> np.ndarray:
            with tracing.span("embedder.embed", texts=1):
                return (await self.embedder.embed.remote([query], deadline=call.deadline, shadow=call.shadow,
                                                         role="query")).vectors[0]

        async def retrieve(query: str, vector: np.ndarray | None, mode: Mode, depth: int,
                           with_vectors: bool) -> CandidatePool:
            with tracing.span("retriever.search", mode=mode, depth=depth):
                return await self.retriever.search.remote(query, vector, mode, depth, with_vectors)

        async def score(query: str, texts: list[str]) -> PassScores:
            with tracing.span("reranker.score", documents=len(texts), variant=call.variant):
                out = await reranker.score.remote(query, texts, shadow=call.shadow, deadline=call.deadline)
            return PassScores(out.scores, out.keys)

        async def fp32_keys(query: str, texts: list[str]) -> np.ndarray:
            with tracing.span("reranker.fp32_keys", documents=len(texts), variant=call.variant):
                return await reranker.fp32_keys.remote(query, texts, shadow=call.shadow)

        return SearchModels(retrieve=retrieve, embed=embed, score=score if call.rerank else None,
                            fp32_keys=fp32_keys if self.rescore_on[call.variant] else None,
                            stored_vectors=self.stored_vectors[call.variant], rewriter=self.rewriter,
                            cutoff=None if cutoff is None else Cutoff(cutoff["margin"], cutoff["max_rescore"]))

    async def search(self, request: SearchCall | dict[str, Any]) -> SearchOutcome:
        """Search one query (:class:`~serve.server.calls.SearchCall`: ``query``, ``top_n`` (default
        ``routing.top_n``), ``mode`` (default ``search.default_mode``), ``shadow`` (evaluator
        traffic: not counted in the user metrics), ``variant``, ``route`` (override),
        ``return_documents``). The call is trusted: the HTTP edge checked the query and ``top_n ≤
        limits.max_top_n``, the evaluator's golden ``quality.top_n`` is checked against that limit when
        the settings load; a dict that is no :class:`SearchCall`, or a variant with no reranker, is an
        :class:`InvalidInputError`."""
        started = time.perf_counter()
        try:
            call = SearchCall.model_validate(request)
        except ValidationError as exc:
            raise InvalidInputError("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())) from None
        if self.rerankers[call.variant] is None:
            raise InvalidInputError(f"variant {call.variant!r} is not configured (no canary reranker)")
        top_n = call.top_n or self.policy.top_n
        mode = call.mode or self.settings.search.default_mode
        policy = self.policy.for_top_n(top_n)
        denoise = call.denoise or self.settings.search.denoise
        if denoise == "llm" and self.rewriter is None:  # no endpoint configured: llm's own fallback, rules
            denoise = "rules"
        facts = await self._facts(call.variant)
        ranked = await search(call.query, mode, self._models(call, facts), policy, call.route or self.route, denoise,
                              self.settings.search.hygiene())
        # a bypassed reranker (call.rerank false) leaves no keys to calibrate
        calibration = None if ranked.ranking is None else self._calibration(call.variant, facts["model"])
        outcome = SearchOutcome.build(
            ranked, call, top_n=top_n, mode=mode, facts=facts, total_s=time.perf_counter() - started,
            calibrated=None if calibration is None else calibration.apply(ranked.rerank_keys),
            calibration=None if calibration is None else calibration.facts())
        if not call.shadow:
            self._record(ranked)
        return outcome

    async def probe_keys(self, variant: str, items: list[tuple[str, list[str]]]) -> list[np.ndarray]:
        """FP32 rank keys of each (query, candidate texts) through ``variant``'s reranker, as shadow
        work: the live Δ-margin probes' similarity (:mod:`serve.server.quality.probes`)."""
        reranker = self.rerankers[variant]
        if reranker is None:
            raise InvalidInputError(f"variant {variant!r} is not configured (no canary reranker)")
        return [np.asarray((await reranker.score.remote(query, texts, shadow=True)).keys, dtype=np.float32)
                for query, texts in items]

    async def query_vectors(self, texts: list[str]) -> np.ndarray:
        """The embedder's query embeddings of ``texts`` (FP32 unit rows, the query prompt), as shadow
        work: what golden drift compares live and golden queries by (:mod:`serve.server.quality.drift`)."""
        out = await self.embedder.embed.remote(list(texts), shadow=True, role="query")
        return np.asarray(out.vectors, dtype=np.float32)

    def _record(self, ranked: Ranked) -> None:
        rec = self.recorder
        for stage, seconds in ranked.timings.items():
            rec.observe("steadyrank_stage_duration_seconds", seconds, stage=stage)
        rec.observe("steadyrank_candidates_reranked", ranked.k)
        decision, ranking = ranked.decision, ranked.ranking
        if decision is None or ranking is None:  # the reranker was bypassed (call.rerank false): no routing
            return
        rec.inc("steadyrank_route_decisions_total", escalated="true" if decision.escalated else "false")
        if decision.escalated:
            for code in set(decision.codes):
                rec.inc("steadyrank_escalations_total", reason=code)
        record_ties(rec, ranking.tie_group_size_at_cutoff, ranking.rescored)
        record_cutoff(rec, ranking.certified, ranking.near_rescored)

"""The Ray Serve deployments behind the ingress, composed by :func:`serve.app.builder.build_app`.

Data flow (``DESIGN.md``): ingress → Searcher (the router: embed, retrieve, dynamic K, rerank) →
Embedder / Retriever / Reranker; ``/v1/rerank`` and ``/v1/embeddings`` call the Reranker and the
Embedder directly. Every replica records metrics through a :class:`~serve.app.telemetry.Recorder`
that flushes to the single ``MetricsHub`` replica.

- ``MetricsHub``: owns the prometheus-client registry (``record(updates)``, ``render()``).
- ``Embedder``: ``embed(texts, count_tokens=False) -> {"vectors": float32 (n, dim), "tokens": int | None}``,
  dynamic batching across requests (``@serve.batch``).
- ``Reranker`` (and ``CanaryReranker``, the same class): ``score(query, docs, shadow=False)`` → FP32
  scores, rank keys and truncation flags; ``rerank(query, docs, top_n)`` → the full ranking with tie
  facts; ``fp32_keys(query, docs, shadow=False)`` for boundary re-scoring. Pairs of all user requests
  in a batch go through one forward pass plan; shadow work (``shadow=True``) runs in small chunks
  behind user work (``serve.app.priority``).
- ``Retriever``: holds the index (``retrieval.store.IndexStore``); ``search(query, vector, mode, depth)``.
- ``Searcher``: ``search(request: dict) -> dict`` (see :meth:`Searcher.search`).

Model runtimes are imported inside the constructors, so replicas that do not need torch never
import it from here.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from ray import serve as ray_serve

from steadyrank.serve.app.priority import ShadowGate, chunks
from steadyrank.serve.app.settings import Settings, load_settings
from steadyrank.serve.runtime.errors import check_rerank_args, check_texts
from steadyrank.serve.app.telemetry import MetricsStore, Recorder

logger = logging.getLogger("steadyrank.app")

Variant = Literal["primary", "canary"]


class InvalidRequest(ValueError):
    """A request a deployment refuses (HTTP 400 at the ingress)."""


@dataclass
class _Failed:
    """One job of a batch failed; the others are unaffected."""

    error: BaseException


def _model_executor() -> ThreadPoolExecutor:
    """One thread for a replica's model (or FAISS) calls: forward passes run one at a time (batching
    provides the concurrency), and OpenMP keeps a single thread team instead of one per pool thread
    (several spinning teams would fight for the cores)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="steadyrank-compute")


async def _in(executor: ThreadPoolExecutor, fn: Any, *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(executor, fn, *args)


def _set_torch_threads(threads: int | None) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)


def _check_texts(texts: Any, what: str) -> list[str]:
    """A handle caller's texts: a list or tuple of strings (``check_texts`` checks the items)."""
    if not isinstance(texts, (list, tuple)):
        raise InvalidRequest(f"{what} must be a list of strings")
    return check_texts(texts, what)


def _run_isolated(jobs: list[Any], run: Any) -> list[Any]:
    """``run(jobs)`` for the whole batch; if it fails, each job alone, so one bad job fails alone."""
    try:
        return run(jobs)
    except Exception as exc:  # noqa: BLE001
        if len(jobs) == 1:
            return [_Failed(exc)]
    out = []
    for job in jobs:
        try:
            out.append(run([job])[0])
        except Exception as exc:  # noqa: BLE001
            out.append(_Failed(exc))
    return out


def _unwrap(outcome: Any) -> Any:
    if isinstance(outcome, _Failed):
        raise outcome.error
    return outcome


# ---------------------------------------------------------------------------------------------


@ray_serve.deployment(name="MetricsHub", num_replicas=1)
class MetricsHub:
    """The one registry every replica's Recorder flushes into; ``/metrics`` renders it."""

    def __init__(self) -> None:
        from steadyrank.serve.app.replicas import ReplicaGauge

        self.store = MetricsStore()
        self.started = time.time()
        self.replicas = ReplicaGauge()

    async def record(self, updates: list[tuple]) -> int:
        return self.store.apply(updates)

    async def render(self) -> bytes:
        from steadyrank.serve.app.replicas import replica_counts

        try:
            counts = await asyncio.wait_for(asyncio.to_thread(replica_counts), timeout=2.0)
            self.store.apply(self.replicas.updates(counts))
        except Exception:  # noqa: BLE001 - a slow or failing controller must not break /metrics
            logger.warning("metrics hub: replica counts unavailable", exc_info=True)
        return self.store.render()

    async def ready(self) -> dict[str, Any]:
        return {"batches": self.store.batches, "rejected": self.store.rejected, "uptime_s": time.time() - self.started}


# ---------------------------------------------------------------------------------------------


@ray_serve.deployment(name="Embedder")
class Embedder:
    """The bi-encoder: query embeddings for search and ``/v1/embeddings``, batched across requests."""

    def __init__(self, settings: Settings | dict, hub: Any) -> None:
        from steadyrank.serve.runtime import load_embedder

        settings = load_settings(settings)
        options = settings.deployments.embedder
        _set_torch_threads(options.torch_threads)
        self.model = load_embedder(settings.embedder)
        self.executor = _model_executor()
        self.recorder = Recorder(hub, flush_interval_s=settings.telemetry.flush_interval_s)
        self._batch.set_max_batch_size(options.max_batch_size)
        self._batch.set_batch_wait_timeout_s(options.batch_wait_timeout_s)

    async def info(self) -> dict[str, Any]:
        m = self.model
        return {"model": m.model_id, "dim": m.dim, "precision": m.precision, "scoring": m.scoring,
                "max_length": m.max_length}

    async def embed(self, texts: list[str], count_tokens: bool = False) -> dict[str, Any]:
        """``{"vectors": float32 (n, dim) unit rows, "tokens": int | None}`` (tokens after truncation)."""
        texts = _check_texts(texts, "input")
        if not texts:
            return {"vectors": np.zeros((0, self.model.dim), dtype=np.float32), "tokens": 0 if count_tokens else None}
        return _unwrap(await self._batch((texts, bool(count_tokens))))

    @ray_serve.batch(max_batch_size=32, batch_wait_timeout_s=0.001)
    async def _batch(self, jobs: list[tuple[list[str], bool]]) -> list[Any]:
        self.recorder.observe("steadyrank_batch_size", len(jobs), deployment="embedder")
        return await _in(self.executor, _run_isolated, jobs, self._encode)

    def _encode(self, jobs: list[tuple[list[str], bool]]) -> list[dict[str, Any]]:
        flat = [t for texts, _ in jobs for t in texts]
        vectors = self.model.encode(flat)
        out, start = [], 0
        for texts, count in jobs:
            tokens = None
            if count:
                tokenizer = self.model.backend.tokenizer
                ids = tokenizer(texts, truncation=True, max_length=self.model.max_length)["input_ids"]
                tokens = int(sum(len(x) for x in ids))
            out.append({"vectors": vectors[start : start + len(texts)], "tokens": tokens})
            start += len(texts)
        return out


# ---------------------------------------------------------------------------------------------


@ray_serve.deployment(name="Reranker")
class Reranker:
    """A scoring model (cross-encoder, causal-LM reranker or bi-encoder) with HPS and tie facts.

    ``role`` is ``primary`` (serves users) or ``canary`` (shadow copies); it only labels metrics.
    """

    def __init__(self, settings: Settings | dict, model: Any, role: Variant, hub: Any) -> None:
        from steadyrank.serve.runtime import ModelSettings, load_scorer

        settings = load_settings(settings)
        options = settings.deployments.reranker if role == "primary" else settings.deployments.canary_reranker
        _set_torch_threads(options.torch_threads)
        model = ModelSettings.model_validate(model)
        self.scorer = load_scorer(model)
        self.executor = _model_executor()
        self.role = role
        self.label = "reranker" if role == "primary" else "canary_reranker"
        self.rescore_on = model.rescores_boundary_ties
        quality = settings.quality
        self.gate = ShadowGate(quality.shadow_idle_s, quality.shadow_max_wait_s)
        self.shadow_chunk_docs = quality.shadow_chunk_docs
        self._twin_lock = threading.Lock()
        self.recorder = Recorder(hub, flush_interval_s=settings.telemetry.flush_interval_s)
        self._batch.set_max_batch_size(options.max_batch_size)
        self._batch.set_batch_wait_timeout_s(options.batch_wait_timeout_s)

    async def info(self) -> dict[str, Any]:
        s = self.scorer
        import torch

        return {"model": s.model_id, "kind": s.kind, "precision": s.precision, "scoring": s.scoring,
                "max_length": s.settings.max_length, "role": self.role, "rescore_boundary_ties": self.rescore_on,
                "torch_threads": torch.get_num_threads()}

    async def score(self, query: str, documents: list[str], shadow: bool = False) -> dict[str, np.ndarray]:
        """``{"scores", "keys"}`` float32 (n,) and ``"truncated"`` bool (n,), in input order.

        ``shadow`` (evaluator traffic): scored in chunks of ``quality.shadow_chunk_docs`` documents,
        each started only when user work leaves room (:class:`~serve.app.priority.ShadowGate`).
        In FP32 the scores equal those of the user path up to FP32 rounding; below FP32 a
        document's logit may differ in its last bits, as it does between user batches.
        """
        if not isinstance(query, str):
            raise InvalidRequest("query must be a string")
        documents = _check_texts(documents, "documents")
        if not documents:
            return {"scores": np.zeros(0, np.float32), "keys": np.zeros(0, np.float32), "truncated": np.zeros(0, bool)}
        if shadow:
            parts = [(await self._shadow_turn(self._score_jobs, [(query, list(part))]))[0]
                     for part in chunks(documents, self.shadow_chunk_docs)]
            return {name: np.concatenate([p[name] for p in parts]) for name in ("scores", "keys", "truncated")}
        async with self.gate.user():
            return _unwrap(await self._batch((query, documents)))

    async def fp32_keys(self, query: str, documents: list[str], shadow: bool = False) -> np.ndarray:
        """Rank keys of ``documents`` from an FP32 forward pass (boundary re-scoring); ``shadow`` as
        in :meth:`score` (one chunk: a tie group is small)."""
        documents = _check_texts(documents, "documents")
        if shadow:
            return await self._shadow_turn(self._fp32_keys, query, documents)
        async with self.gate.user():
            return await _in(self.executor, self._fp32_keys, query, documents)

    async def _shadow_turn(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on the compute thread once the gate gives shadow work its turn."""
        waited = await self.gate.turn()
        self.recorder.observe("steadyrank_shadow_wait_seconds", waited, deployment=self.label)
        return await _in(self.executor, fn, *args)

    def _fp32_keys(self, query: str, documents: list[str]) -> np.ndarray:
        with self._twin_lock:  # the FP32 twin is loaded once, lazily
            twin = self.scorer.fp32_twin()
        return twin.score([(query, d) for d in documents]).keys

    async def rerank(self, query: str, documents: list[str], top_n: int | None = None, record: bool = True) -> dict[str, Any]:
        """The ranking of ``documents`` for ``query``, as ``Scorer.rerank`` (ties by input index;
        a tie straddling ``top_n`` settled by FP32 re-scoring when the model runs below FP32).

        Returns ``scores`` (float32, input order), ``order`` (input indices by rank), ``tie_groups``,
        ``tie_at_cutoff``, ``tie_group_size_at_cutoff``, ``rescored``, ``truncated`` (indices) and
        the model facts. ``record`` = count it as user traffic in the metrics.
        """
        from steadyrank.metrics import straddling_group, tie_groups
        from steadyrank.serve.runtime.rescoring import resolve_boundary

        started = time.perf_counter()
        documents = check_rerank_args(query, _check_texts(documents, "documents"), top_n)
        scored = await self.score(query, documents)
        keys = scored["keys"]
        group = straddling_group(keys, top_n) if top_n is not None and top_n < keys.size else None
        fine = None
        if group is not None and self.rescore_on:
            fine = await self.fp32_keys(query, [documents[i] for i in group])
        resolution = resolve_boundary(keys, top_n, (lambda _: fine) if fine is not None else None)
        result = {
            "scores": scored["scores"],
            "order": resolution.order,
            "tie_groups": [g.tolist() for g in tie_groups(keys, min_size=2)],
            "tie_at_cutoff": resolution.tie_at_cutoff,
            "tie_group_size_at_cutoff": 0 if group is None else int(group.size),
            "rescored": resolution.rescored,
            "truncated": np.flatnonzero(scored["truncated"]).tolist(),
            "model": self.scorer.model_id,
            "precision": self.scorer.precision,
            "scoring": self.scorer.scoring,
        }
        if record:
            rec = self.recorder
            rec.observe("steadyrank_stage_duration_seconds", time.perf_counter() - started, stage="rerank")
            rec.observe("steadyrank_candidates_reranked", len(documents))
            record_ties(rec, result["tie_group_size_at_cutoff"], result["rescored"])
        return result

    @ray_serve.batch(max_batch_size=4, batch_wait_timeout_s=0.001)
    async def _batch(self, jobs: list[tuple[str, list[str]]]) -> list[Any]:
        self.recorder.observe("steadyrank_batch_size", len(jobs), deployment=self.label)
        return await _in(self.executor, _run_isolated, jobs, self._score_jobs)

    def _score_jobs(self, jobs: list[tuple[str, list[str]]]) -> list[dict[str, np.ndarray]]:
        pairs = [(query, doc) for query, docs in jobs for doc in docs]
        scored = self.scorer.score(pairs)
        out, start = [], 0
        for _, docs in jobs:
            rows = slice(start, start + len(docs))
            out.append({"scores": scored.scores[rows], "keys": scored.keys[rows], "truncated": scored.truncated[rows]})
            start += len(docs)
        return out


def record_ties(recorder: Recorder, straddling_size: int, rescored: int) -> None:
    """Tie metrics of one user ranking: the group straddling the cutoff and its re-scoring."""
    if straddling_size:
        recorder.inc("steadyrank_ties_at_cutoff_total")
        recorder.observe("steadyrank_tie_group_size_at_cutoff", straddling_size)
    if rescored:
        recorder.inc("steadyrank_rescored_ties_total", rescored)


# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _EmbedderIdentity:
    """The embedder as the Retriever's index store sees it: its identity (checked against the
    manifest when the index opens), no weights; query vectors come from the Embedder deployment."""

    model_id: str
    dim: int

    def encode(self, texts: list[str], *, show_progress: bool = False) -> np.ndarray:
        raise RuntimeError("the Retriever encodes no text itself: pass the query vector")


@ray_serve.deployment(name="Retriever")
class Retriever:
    """Holds the index (FAISS + BM25, ``retrieval.store``); builds the embedded default's on first start."""

    def __init__(self, settings: Settings | dict, hub: Any) -> None:
        from steadyrank.retrieval.store import IndexStore
        from steadyrank.serve.app.default import embedder_identity, ensure_index

        settings = load_settings(settings)
        _set_torch_threads(settings.deployments.retriever.torch_threads)
        self.path = ensure_index(settings)
        model_id, dim = embedder_identity(settings.embedder)
        self.store = IndexStore.open(self.path, _EmbedderIdentity(model_id, dim))
        self.executor = _model_executor()
        self.search_settings = settings.search
        self.recorder = Recorder(hub, flush_interval_s=settings.telemetry.flush_interval_s)

    async def info(self) -> dict[str, Any]:
        manifest = self.store.manifest
        return {"path": str(self.path), "generation": self.store.generation, "documents": self.store.count,
                "embedder": manifest["embedder"], "dense": manifest["dense"], "bm25": manifest["bm25"] is not None}

    async def search(self, query: str, vector: np.ndarray | None, mode: str, depth: int) -> dict[str, Any]:
        """Top ``depth`` candidates: ``ids``, ``scores``, ``texts`` (what is reranked: title + text),
        ``text``/``title`` (for display), the component lists and the store's ``timings`` (s)."""
        return await _in(self.executor, self._search, query, vector, mode, depth)

    def _search(self, query: str, vector: np.ndarray | None, mode: str, depth: int) -> dict[str, Any]:
        s = self.search_settings
        if mode != "bm25" and vector is None:
            raise InvalidRequest(f"mode {mode!r} needs the query vector")
        try:
            found = self.store.search(query, mode=mode, depth=depth, rrf_k=s.rrf_k,
                                      rrf_weights=tuple(s.rrf_weights), vector=vector)
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None
        docs = [self.store.document(doc_id) for doc_id in found.doc_ids]
        return {
            "ids": found.doc_ids,
            "scores": np.asarray(found.scores, dtype=np.float64),
            "texts": [d.full_text for d in docs],
            "text": [d.text for d in docs],
            "title": [d.title for d in docs],
            "dense_ids": None if found.dense is None else found.dense.doc_ids,
            "dense_scores": None if found.dense is None else np.asarray(found.dense.scores),
            "sparse_ids": None if found.sparse is None else found.sparse.doc_ids,
            "timings": dict(found.timings),
        }


# ---------------------------------------------------------------------------------------------


class SearchCall(BaseModel):
    """The Searcher's request (the ingress' ``/v1/search`` body plus the shadow fields)."""

    model_config = ConfigDict(extra="forbid")

    query: str
    top_n: int | None = Field(None, ge=1)
    mode: Literal["dense", "bm25", "hybrid"] | None = None
    shadow: bool = False
    variant: Variant = "primary"
    route: Literal["dynamic", "fixed50", "fixed100"] | None = None
    return_documents: bool = True


@ray_serve.deployment(name="Searcher")
class Searcher:
    """The router of the data flow: embed → retrieve K_high → rerank k_low → route → rerank up to
    K_high when escalating → settle a tie at top_n → results and every reranked candidate."""

    def __init__(self, settings: Settings | dict, embedder: Any, retriever: Any, reranker: Any,
                 canary: Any, hub: Any) -> None:
        settings = load_settings(settings)
        self.settings = settings
        self.policy = settings.routing_policy()
        self.route = settings.routing.route
        self.embedder, self.retriever = embedder, retriever
        self.rerankers = {"primary": reranker, "canary": canary}
        models = {"primary": settings.reranker_model, "canary": settings.canary}
        self.rescore_on = {
            v: m is not None and m.rescores_boundary_ties
            for v, m in models.items()
        }
        self.facts: dict[str, dict[str, Any]] = {}
        self.recorder = Recorder(hub, flush_interval_s=settings.telemetry.flush_interval_s)

    async def _facts(self, variant: str) -> dict[str, Any]:
        if variant not in self.facts:
            self.facts[variant] = await self.rerankers[variant].info.remote()
        return self.facts[variant]

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

    async def search(self, request: dict[str, Any]) -> dict[str, Any]:
        """Search one query.

        ``request``: ``query``, ``top_n`` (default ``routing.top_n``), ``mode`` (default
        ``search.default_mode``), ``shadow`` (True = evaluator traffic: not counted in the user
        metrics), ``variant`` (``primary`` | ``canary``: which reranker), ``route`` (override),
        ``return_documents``.

        Returns ``results`` (top_n: ``id``, ``relevance_score``, ``text``, ``title``),
        ``candidates`` (every reranked candidate in served order: ``id``, ``relevance_score`` —
        the exact float32 score — and ``rank_key``) and ``meta`` (``k``, ``escalated``,
        ``reasons``, ``signals``, ``stages_ms``, ``mode``, ``retrieved``, ``tie_groups`` (doc ids),
        ``tie_at_cutoff``, ``tie_group_size_at_cutoff``, ``rescored_ties``, ``model``,
        ``precision``, ``scoring``, ``variant``, ``shadow``).
        Served order: rank key descending, equal keys in retrieval order, except a tie straddling
        top_n settled by FP32 re-scoring. Raises :class:`InvalidRequest` for a bad request.
        """
        from steadyrank.metrics import straddling_group, tie_groups
        from steadyrank.retrieval.routing import compute_signals, decide
        from steadyrank.serve.runtime.rescoring import resolve_boundary

        started = time.perf_counter()
        try:
            call = SearchCall.model_validate(request)
        except ValidationError as exc:
            raise InvalidRequest("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())) from None
        query = call.query
        if not query.strip():
            raise InvalidRequest("query must not be empty")
        reranker = self.rerankers[call.variant]
        if reranker is None:
            raise InvalidRequest(f"variant {call.variant!r} is not configured (no canary reranker)")
        top_n = call.top_n or self.policy.top_n
        if top_n > self.settings.limits.max_top_n:
            raise InvalidRequest(f"top_n must be ≤ {self.settings.limits.max_top_n}, got {top_n}")
        mode = call.mode or self.settings.search.default_mode
        policy = replace(self.policy, top_n=top_n,
                         k_low=min(max(self.policy.k_low, top_n), self.policy.k_high))
        stages: dict[str, float] = {}

        vector = None
        if mode != "bm25":
            t = time.perf_counter()
            vector = (await self.embedder.embed.remote([query]))["vectors"][0]
            stages["embed"] = time.perf_counter() - t
        t = time.perf_counter()
        found = await self.retriever.search.remote(query, vector, mode, policy.k_high)
        stages["retrieve"] = time.perf_counter() - t

        ids, texts = found["ids"], found["texts"]
        n = len(ids)
        low = min(policy.k_low, n)
        t = time.perf_counter()
        first = await reranker.score.remote(query, texts[:low], shadow=call.shadow) if low else None
        rerank_s = time.perf_counter() - t

        t = time.perf_counter()
        scores = first["scores"] if first else np.zeros(0, np.float32)
        keys = first["keys"] if first else np.zeros(0, np.float32)
        signals = compute_signals(
            policy, n_candidates=n, rerank_scores=scores,
            dense_scores=found["dense_scores"], dense_ids=found["dense_ids"], sparse_ids=found["sparse_ids"],
        )
        decision = decide(signals, policy, call.route or self.route)
        stages["route"] = time.perf_counter() - t

        t = time.perf_counter()
        if decision.k_rerank > low:
            second = await reranker.score.remote(query, texts[low : decision.k_rerank], shadow=call.shadow)
            scores = np.concatenate([scores, second["scores"]])
            keys = np.concatenate([keys, second["keys"]])
        k = int(keys.size)
        group = straddling_group(keys, top_n) if top_n < k else None
        fine = None
        if group is not None and self.rescore_on[call.variant]:
            fine = await reranker.fp32_keys.remote(query, [texts[i] for i in group], shadow=call.shadow)
        resolution = resolve_boundary(keys, top_n, (lambda _: fine) if fine is not None else None)
        rerank_s += time.perf_counter() - t
        stages["rerank"] = rerank_s
        order = resolution.order

        facts = await self._facts(call.variant)
        candidates = [{"id": ids[i], "relevance_score": float(scores[i]), "rank_key": float(keys[i])} for i in order]
        results = []
        for i in order[:top_n]:
            item: dict[str, Any] = {"id": ids[i], "relevance_score": float(scores[i])}
            if call.return_documents:
                item["text"] = found["text"][i]
                if found["title"][i]:
                    item["title"] = found["title"][i]
            results.append(item)
        total = time.perf_counter() - started
        meta = {
            "k": k,
            "escalated": decision.escalated,
            "reasons": list(decision.reasons),
            "signals": signals.to_json(),
            "stages_ms": {**{name: 1000.0 * v for name, v in stages.items()}, "total": 1000.0 * total},
            "retrieval_ms": {name: 1000.0 * v for name, v in found["timings"].items()},
            "mode": mode,
            "retrieved": n,
            "tie_groups": [[ids[i] for i in g] for g in tie_groups(keys, min_size=2)],
            "tie_at_cutoff": resolution.tie_at_cutoff,
            "tie_group_size_at_cutoff": 0 if group is None else int(group.size),
            "rescored_ties": resolution.rescored,
            "model": facts["model"],
            "precision": facts["precision"],
            "scoring": facts["scoring"],
            "variant": call.variant,
            "shadow": call.shadow,
            "partial": bool(found.get("partial", False)),
            "missing_shards": list(found.get("missing_shards", [])),
        }
        if not call.shadow:
            self._record(stages, k, decision, meta)
        return {"results": results, "candidates": candidates, "meta": meta}

    def _record(self, stages: dict[str, float], k: int, decision: Any, meta: dict[str, Any]) -> None:
        rec = self.recorder
        for stage, seconds in stages.items():
            rec.observe("steadyrank_stage_duration_seconds", seconds, stage=stage)
        rec.observe("steadyrank_candidates_reranked", k)
        rec.inc("steadyrank_route_decisions_total", escalated="true" if decision.escalated else "false")
        if decision.escalated:
            for code in set(decision.codes):
                rec.inc("steadyrank_escalations_total", reason=code)
        record_ties(rec, meta["tie_group_size_at_cutoff"], meta["rescored_ties"])

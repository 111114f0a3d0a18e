"""Serving a sharded index (``index.shards`` > 1): one ``RetrieverShard<i>`` deployment per shard
and a ``Retriever`` front with the unsharded Retriever's interface that scatters each search to
every shard and merges exactly (:func:`steadyrank.retrieval.shards.scatter_gather`).

Placement: each shard deployment has its own replica set (``deployments.retriever`` options). With
``index.shard_resource: P`` shard i's replicas also need ``0.001`` of the custom Ray resource
``P<i>``, so only nodes started with it (``ray start --resources '{"P0": 1}'``, or a KubeRay
worker group's ``rayStartParams.resources``) hold shard i — one node per shard set, its memory
holding one shard. A shard that fails or misses ``index.shard_timeout_s`` fails the search with
503, or with ``index.partial_results: true`` the others answer with ``meta.partial: true`` and
``meta.missing_shards``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from ray import serve as ray_serve

from steadyrank.retrieval.shards import ShardAnswer, answer_from_store, open_shard, scatter_gather
from steadyrank.serve.app.deployments import InvalidRequest, _EmbedderIdentity, _in, _model_executor
from steadyrank.serve.app.settings import Settings, load_settings
from steadyrank.serve.app.telemetry import Recorder

SHARD_RESOURCE_AMOUNT = 0.001


def shard_deployment_name(index: int) -> str:
    return f"RetrieverShard{index}"


def shard_options(settings: Settings, index: int) -> dict[str, Any]:
    """Ray Serve options of shard ``index``'s deployment: the Retriever's, plus the placement resource."""
    options = settings.deployments.retriever.ray_options()
    prefix = settings.index.shard_resource
    if prefix:
        actor = dict(options["ray_actor_options"])
        actor["resources"] = {f"{prefix}{index}": SHARD_RESOURCE_AMOUNT}
        options["ray_actor_options"] = actor
    return {"name": shard_deployment_name(index), **options}


@ray_serve.deployment(name="RetrieverShard")
class RetrieverShard:
    """One shard of the index (its documents only, scored with the corpus-wide BM25 statistics)."""

    def __init__(self, settings: Settings | dict, index: int) -> None:
        from steadyrank.serve.app.default import embedder_identity, ensure_index

        settings = load_settings(settings)
        self.index = index
        self.path = ensure_index(settings)
        model_id, dim = embedder_identity(settings.embedder)
        self.store = open_shard(self.path, index, _EmbedderIdentity(model_id, dim))
        self.executor = _model_executor()

    async def info(self) -> dict[str, Any]:
        import ray

        return {"shard": self.index, "path": str(self.path), "generation": self.store.generation,
                "documents": self.store.count, "node_id": ray.get_runtime_context().get_node_id()}

    async def search(self, query: str, vector: np.ndarray | None, mode: str, depth: int) -> ShardAnswer:
        """This shard's component lists for ``mode`` (see :func:`answer_from_store`)."""
        return await _in(self.executor, self._search, query, vector, mode, depth)

    def _search(self, query: str, vector: np.ndarray | None, mode: str, depth: int) -> ShardAnswer:
        try:
            return answer_from_store(self.store, query, mode=mode, depth=depth, vector=vector)
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None


@ray_serve.deployment(name="Retriever")
class ShardedRetriever:
    """The Retriever of a sharded index: same ``info``/``search`` as the unsharded one, plus
    ``partial`` and ``missing_shards`` in the search result."""

    def __init__(self, settings: Settings | dict, hub: Any, *shards: Any) -> None:
        settings = load_settings(settings)
        self.shards = shards
        self.index_settings = settings.index
        self.search_settings = settings.search
        self.recorder = Recorder(hub, flush_interval_s=settings.telemetry.flush_interval_s)

    async def info(self) -> dict[str, Any]:
        infos = [await shard.info.remote() for shard in self.shards]
        return {"shards": infos, "documents": sum(i["documents"] for i in infos), "path": infos[0]["path"]}

    async def search(self, query: str, vector: np.ndarray | None, mode: str, depth: int) -> dict[str, Any]:
        """Scatter to every shard, merge exactly; the unsharded Retriever's result plus ``partial``."""
        if mode != "bm25" and vector is None:
            raise InvalidRequest(f"mode {mode!r} needs the query vector")
        s, index = self.search_settings, self.index_settings
        started = time.perf_counter()
        calls = [lambda shard=shard: shard.search.remote(query, vector, mode, depth) for shard in self.shards]
        gathered = await scatter_gather(
            calls, mode=mode, depth=depth, timeout_s=index.shard_timeout_s, partial_ok=index.partial_results,
            rrf_k=s.rrf_k, rrf_weights=tuple(s.rrf_weights),
        )
        self.recorder.observe("steadyrank_stage_duration_seconds", time.perf_counter() - started, stage="scatter_gather")
        if gathered.partial:
            self.recorder.inc("steadyrank_partial_searches_total")
        found, docs = gathered.candidates, gathered.documents
        return {
            "ids": found.doc_ids,
            "scores": np.asarray(found.scores, dtype=np.float64),
            "texts": [docs[i].full_text for i in found.doc_ids],
            "text": [docs[i].text for i in found.doc_ids],
            "title": [docs[i].title for i in found.doc_ids],
            "dense_ids": None if found.dense is None else found.dense.doc_ids,
            "dense_scores": None if found.dense is None else np.asarray(found.dense.scores),
            "sparse_ids": None if found.sparse is None else found.sparse.doc_ids,
            "timings": dict(found.timings),
            "partial": gathered.partial,
            "missing_shards": sorted(gathered.missing),
        }


def bind_sharded_retriever(settings: Settings, hub: Any) -> Any:
    """The bound ``Retriever`` front over ``index.shards`` bound shard deployments."""
    shards = [RetrieverShard.options(**shard_options(settings, i)).bind(settings, i)
              for i in range(settings.index.shards)]
    return ShardedRetriever.options(**settings.deployments.retriever.ray_options()).bind(settings, hub, *shards)

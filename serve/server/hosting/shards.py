"""Serving a sharded index (``index.shards`` > 1): one ``RetrieverShard<i>`` deployment per shard
and a ``Retriever`` front with the unsharded Retriever's interface that scatters each search to
every shard and merges exactly (:func:`steadyrank.retrieval.shards.scatter_gather`).

Placement: each shard deployment has its own replica set (``deployments.retriever`` options). With
``index.shard_resource: P`` shard i's replicas also need ``0.001`` of the custom Ray resource
``P<i>``, so only nodes started with it (``ray start --resources '{"P0": 1}'``, or a KubeRay
worker group's ``rayStartParams.resources``) hold shard i — one node per shard set, its memory
holding one shard. A shard that fails or misses ``index.shard_timeout_s`` fails the search with
503, or with ``index.partial_results: true`` the others answer with ``meta.partial: true`` and
``meta.missing_shards`` (docs/ARCHITECTURE.md, "Sharded index").

Replica and node loss: a shard call whose replica died, or whose node stopped answering, is made
again within ``index.shard_timeout_s`` (:mod:`serve.server.retry`, with
:func:`~serve.server.hosting.failures.replica_lost`), counted in
``steadyrank_request_retries_total{reason="shard_replica_lost"}``: Serve routes the repeat to the
shard's other replica (on another node) or to its replacement, so with two replicas per shard on two
nodes the loss of one node fails no search.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from steadyrank.retrieval.modes import Mode
from steadyrank.retrieval.pipeline import CandidatePool
from steadyrank.retrieval.shards import ShardAnswer, answer_from_store, open_shard, scatter_gather
from steadyrank.serve.errors import InvalidInputError
from steadyrank.serve.server.calls import Deadline
from steadyrank.serve.server.components.common import model_executor, run_in
from steadyrank.serve.server.hosting.failures import replica_lost
from steadyrank.serve.server.retry import again_if_lost
from steadyrank.serve.settings import Settings, load_settings
from steadyrank.serve.telemetry import Recorder

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


class RetrieverShard:
    """One shard of the index (its documents only, scored with the corpus-wide BM25 statistics)."""

    def __init__(self, settings: Settings | dict, index: int) -> None:
        from steadyrank.serve.server.default import embedder_identity, ensure_index

        settings = load_settings(settings)
        self.index = index
        self.path = ensure_index(settings)
        self.store = open_shard(self.path, index, embedder_identity(settings.embedder))
        self.executor = model_executor(settings.deployments.background_niceness)

    async def info(self) -> dict[str, Any]:
        import ray

        manifest = self.store.manifest
        return {"shard": self.index, "path": str(self.path), "generation": self.store.generation,
                "documents": self.store.count, "node_id": ray.get_runtime_context().get_node_id(),
                "embedder": manifest["embedder"], "dense": manifest["dense"], "bm25": manifest["bm25"] is not None}

    async def search(self, query: str, vector: np.ndarray | None, mode: Mode, depth: int,
                     with_vectors: bool = False) -> ShardAnswer:
        """This shard's component lists for ``mode`` (see :func:`answer_from_store`)."""
        return await run_in(self.executor, self._search, query, vector, mode, depth, with_vectors)

    def _search(self, query: str, vector: np.ndarray | None, mode: Mode, depth: int,
                with_vectors: bool) -> ShardAnswer:
        try:
            return answer_from_store(self.store, query, mode=mode, depth=depth, vector=vector,
                                     with_vectors=with_vectors)
        except ValueError as exc:
            raise InvalidInputError(str(exc)) from None


class ShardedRetriever:
    """The Retriever of a sharded index: the unsharded one's ``info``/``search``; the pool's
    ``missing_shards`` names the shards left out (partial results)."""

    def __init__(self, settings: Settings | dict, hub: Any, *shards: Any) -> None:
        settings = load_settings(settings)
        self.shards = shards
        self.index_settings = settings.index
        self.search_settings = settings.search
        self.recorder = Recorder(hub, flush_interval_s=settings.telemetry.flush_interval_s)

    async def info(self) -> dict[str, Any]:
        infos = [await shard.info.remote() for shard in self.shards]
        first = infos[0]
        return {"path": first["path"], "documents": sum(i["documents"] for i in infos), "shards": infos,
                "embedder": first["embedder"], "dense": first["dense"], "bm25": first["bm25"]}

    async def search(self, query: str, vector: np.ndarray | None, mode: Mode, depth: int,
                     with_vectors: bool = False) -> CandidatePool:
        """Scatter to every shard, merge exactly (see the module docstring)."""
        if mode != "bm25" and vector is None:
            raise InvalidInputError(f"mode {mode!r} needs the query vector")
        s, index = self.search_settings, self.index_settings
        started = time.perf_counter()
        deadline = Deadline.after(index.shard_timeout_s)
        calls = [lambda shard=shard: again_if_lost(lambda: shard.search.remote(query, vector, mode, depth, with_vectors),
                                                   deadline, self._count_repeat, replica_lost)
                 for shard in self.shards]
        gathered = await scatter_gather(
            calls, mode=mode, depth=depth, timeout_s=index.shard_timeout_s, partial_ok=index.partial_results,
            rrf_k=s.rrf_k, rrf_weights=s.rrf_weights,
        )
        self.recorder.observe("steadyrank_stage_duration_seconds", time.perf_counter() - started, stage="scatter_gather")
        if gathered.partial:
            self.recorder.inc("steadyrank_partial_searches_total")
        return gathered.pool()

    def _count_repeat(self) -> None:
        self.recorder.inc("steadyrank_request_retries_total", reason="shard_replica_lost")

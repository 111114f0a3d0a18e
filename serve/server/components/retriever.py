"""``Retriever``: holds the index (FAISS + BM25, :mod:`retrieval.store`); builds the embedded default's on first start."""

from __future__ import annotations

from typing import Any

import numpy as np

from steadyrank.retrieval.modes import Mode
from steadyrank.retrieval.pipeline import CandidatePool
from steadyrank.serve.errors import InvalidInputError
from steadyrank.serve.server.components.common import model_executor, run_in
from steadyrank.serve.settings import Settings, load_settings


class Retriever:
    """``search(query, vector, mode, depth)`` → :class:`~retrieval.pipeline.CandidatePool`."""

    def __init__(self, settings: Settings | dict) -> None:
        from steadyrank.retrieval.store import IndexStore
        from steadyrank.serve.server.default import embedder_identity, ensure_index

        settings = load_settings(settings)
        self.path = ensure_index(settings)
        # the embedder's identity (id, dim, prompts), checked against the manifest; no weights: query
        # vectors come from the Embedder deployment
        self.store = IndexStore.open(self.path, embedder_identity(settings.embedder))
        self.executor = model_executor(settings.deployments.background_niceness)
        self.search_settings = settings.search

    async def info(self) -> dict[str, Any]:
        manifest = self.store.manifest
        return {"path": str(self.path), "generation": self.store.generation, "documents": self.store.count,
                "embedder": manifest["embedder"], "dense": manifest["dense"], "bm25": manifest["bm25"] is not None}

    async def search(self, query: str, vector: np.ndarray | None, mode: Mode, depth: int,
                     with_vectors: bool = False) -> CandidatePool:
        """The top ``depth`` candidates of ``mode`` (``vector``: the query embedding, None for bm25);
        ``with_vectors``: with their stored float32 vectors."""
        return await run_in(self.executor, self._search, query, vector, mode, depth, with_vectors)

    def _search(self, query: str, vector: np.ndarray | None, mode: Mode, depth: int,
                with_vectors: bool) -> CandidatePool:
        s = self.search_settings
        if mode != "bm25" and vector is None:
            raise InvalidInputError(f"mode {mode!r} needs the query vector")
        try:
            found = self.store.search(query, mode=mode, depth=depth, rrf_k=s.rrf_k,
                                      rrf_weights=s.rrf_weights, vector=vector)
        except ValueError as exc:
            raise InvalidInputError(str(exc)) from None
        return CandidatePool.from_store(self.store, found, with_vectors)

"""The two model interfaces `retrieval` depends on, as structural Protocols.

`retrieval` never imports a model runtime: the caller passes objects that satisfy these
Protocols (``serve.runtime.load_embedder`` / ``load_scorer`` return such objects).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np


class Embedder(Protocol):
    """A bi-encoder: texts → L2-normalised float32 vectors.

    ``model_id`` names the model (and anything that changes its vectors); ``document_prompt`` is put
    before every indexed document and ``query_prompt`` before every query (sentence-transformers'
    prompts, ``""`` for none). An index records all four and refuses to be searched with an
    embedder whose ``model_id``, ``dim`` or prompts differ.
    """

    model_id: str
    dim: int
    query_prompt: str
    document_prompt: str

    def encode(self, texts: list[str], *, prompt: str = "", show_progress: bool = False) -> np.ndarray:
        """Float32 array of shape (len(texts), dim), each row of unit L2 norm, each text after ``prompt``."""
        ...


class ScoredPairs(Protocol):
    """What a reranker returns for pairs, in input order: ``scores`` (float32, φ of the logits) and
    ``keys`` (float32 rank keys: what the served order sorts by; HPS: the FP32 logit or margin)."""

    @property
    def scores(self) -> np.ndarray: ...

    @property
    def keys(self) -> np.ndarray: ...


class Reranker(Protocol):
    """A pointwise reranker: a pair's score does not depend on the other pairs passed.

    ``rescores_boundary_ties``: the model runs below FP32 and a tie straddling ``top_n`` is to be
    settled by ``fp32_keys`` (the same pairs through an FP32 forward pass).
    """

    @property
    def rescores_boundary_ties(self) -> bool: ...

    def score(self, pairs: Sequence[tuple[str, str]]) -> ScoredPairs:
        """Score every (query, document) pair."""
        ...

    def fp32_keys(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Rank keys of ``pairs`` from an FP32 forward pass."""
        ...

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

    ``model_id`` names the model (and anything that changes its vectors); an index records it and
    refuses to be searched with an embedder whose ``model_id`` or ``dim`` differ.
    """

    model_id: str
    dim: int

    def encode(self, texts: list[str], *, show_progress: bool = False) -> np.ndarray:
        """Float32 array of shape (len(texts), dim), each row of unit L2 norm."""
        ...


class Reranked(Protocol):
    """What a reranker returns: ``scores`` (float32), one per document, in input order."""

    @property
    def scores(self) -> np.ndarray: ...


class Reranker(Protocol):
    """A pointwise reranker: a document's score does not depend on the other documents passed."""

    def rerank(self, query: str, documents: Sequence[str], top_n: int | None = None) -> Reranked:
        """Score every document against ``query``."""
        ...

"""Embedder: texts → L2-normalised float32 embeddings from a bi-encoder."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from steadyrank.serve.runtime import hps
from steadyrank.serve.runtime.errors import check_texts
from steadyrank.serve.runtime.inspection import ModelSpec
from steadyrank.serve.runtime.settings import ModelSettings
from steadyrank.serve.runtime.transformers_backend import TransformersBackend


class Embedder:
    """A loaded bi-encoder. ``encode`` pools in the model dtype, then normalises:

    - ``scoring="hps"``: ``e = h.float() / ‖h.float()‖₂`` (FP32);
    - ``scoring="native"``: normalised in the model dtype, then cast to float32 (keeps its ties).
    """

    def __init__(self, spec: ModelSpec, settings: ModelSettings, model_id: str) -> None:
        self.spec = spec
        self.settings = settings
        self.model_id = model_id
        self.precision = settings.precision
        self.scoring = settings.scoring
        self.backend = TransformersBackend(spec, settings)
        self.dim = int(self.backend.model.config.hidden_size)
        self.max_length = self.backend.max_length

    def pooled(self, texts: Sequence[str], *, show_progress: bool = False) -> tuple[torch.Tensor, np.ndarray]:
        """Pooled, un-normalised embeddings in the model dtype (n, dim) and per-text truncation flags."""
        items = check_texts(texts, "texts")
        if not items:
            return torch.empty((0, self.dim), dtype=self.backend.dtype), np.zeros(0, dtype=bool)
        return self.backend.pooled(items, show_progress=show_progress)

    def encode(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        """L2-normalised embeddings, float32 numpy (n, dim), one row per text in input order."""
        pooled, _ = self.pooled(texts, show_progress=show_progress)
        return hps.embeddings(pooled, self.scoring)

    def encode_many(self, text_lists: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """:meth:`encode` of each list, their forward batches sharing the forward lanes
        (:func:`serve.runtime.batching.run_batched_many`); each list's vectors are bitwise what
        :meth:`encode` gives it alone."""
        items = [check_texts(texts, "texts") for texts in text_lists]
        full = [k for k, texts in enumerate(items) if texts]
        out = [np.zeros((0, self.dim), dtype=np.float32) for _ in items]
        for k, (pooled, _) in zip(full, self.backend.pooled_many([items[k] for k in full]), strict=True):
            out[k] = hps.embeddings(pooled, self.scoring)
        return out

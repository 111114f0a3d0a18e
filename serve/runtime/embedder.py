"""Embedder: texts → L2-normalised float32 embeddings from a bi-encoder, each text after a prompt."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from steadyrank.serve.errors import check_texts
from steadyrank.serve.runtime import hps
from steadyrank.serve.runtime.inspection import ModelSpec
from steadyrank.serve.runtime.precision import resolve
from steadyrank.serve.runtime.settings import ModelSettings, Scoring
from steadyrank.serve.runtime.transformers_backend import TransformersBackend


class Embedder:
    """A loaded bi-encoder. ``encode`` pools (and applies the Dense layers) in the model dtype, then
    normalises:

    - ``scoring="hps"``: ``e = h.float() / ‖h.float()‖₂`` (FP32);
    - ``scoring="native"``: normalised in the model dtype, then cast to float32 (keeps its ties).

    ``prompts`` are the model's (:class:`serve.runtime.prompts.EmbedPrompts`); ``query_prompt`` and
    ``document_prompt`` are what the retrieval layer puts before queries and documents.
    """

    def __init__(self, spec: ModelSpec, settings: ModelSettings, model_id: str) -> None:
        self.spec = spec
        self.settings, self.precision_choice = resolve(settings)  # precision "auto" → what runs here
        self.model_id = model_id
        self.precision = self.settings.precision
        self.scoring: Scoring = settings.scoring
        self.backend = TransformersBackend(spec, self.settings)
        self.dim = self.backend.dim
        self.max_length = self.backend.max_length
        self.prompts = spec.prompts
        self.query_prompt = spec.prompts.query
        self.document_prompt = spec.prompts.document

    def pooled(self, texts: Sequence[str], *, prompt: str = "",
               show_progress: bool = False) -> tuple[torch.Tensor, np.ndarray]:
        """Pooled, un-normalised embeddings in the model dtype (n, dim) and per-text truncation flags."""
        return self.pooled_many([texts], [prompt], show_progress=show_progress)[0]

    def pooled_many(
        self, text_lists: Sequence[Sequence[str]], prompts: Sequence[str] | None = None, *, show_progress: bool = False
    ) -> list[tuple[torch.Tensor, np.ndarray]]:
        """:meth:`pooled` of each list (``prompts[k]`` before each text of list k; None: no prompt), their
        forward batches sharing the forward lanes (:func:`serve.runtime.batching.run_batched_many`):
        each list's result is bitwise what it gets alone; an empty list gets no rows."""
        items = [check_texts(texts, "texts") for texts in text_lists]
        chosen = list(prompts) if prompts is not None else [""] * len(items)
        full = [k for k, texts in enumerate(items) if texts]
        out = [(torch.empty((0, self.dim), dtype=self.backend.dtype), np.zeros(0, dtype=bool)) for _ in items]
        results = self.backend.pooled_many([items[k] for k in full], [chosen[k] for k in full], show_progress)
        for k, result in zip(full, results, strict=True):
            out[k] = result
        return out

    def encode(self, texts: Sequence[str], *, prompt: str = "", show_progress: bool = False) -> np.ndarray:
        """L2-normalised embeddings, float32 numpy (n, dim), one row per text (after ``prompt``) in input order."""
        return self.encode_many([texts], [prompt], show_progress=show_progress)[0]

    def encode_many(self, text_lists: Sequence[Sequence[str]], prompts: Sequence[str] | None = None, *,
                    show_progress: bool = False) -> list[np.ndarray]:
        """:meth:`encode` of each list (batches shared as in :meth:`pooled_many`)."""
        return [hps.embeddings(pooled, self.scoring)
                for pooled, _ in self.pooled_many(text_lists, prompts, show_progress=show_progress)]

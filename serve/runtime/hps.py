"""The scoring functions φ, applied in FP32 (HPS) or in the model dtype (native).

High-Precision Scoring keeps the forward pass in low precision and upcasts only its final output
before φ. Every BF16/FP16 value is exact in FP32, so HPS loses nothing and separates scores that φ
in the model dtype would round to the same value (spurious ties):

- 1 logit ``z``: ``hps = sigmoid(z.float())``; ``native = sigmoid(z).float()``.
- 2 logits (cross-encoder ``[neg, pos]``, causal-LM ``[z_no, z_yes]``):
  ``hps = softmax(z.float())[:, 1]`` (= ``sigmoid(z_yes − z_no)`` in FP32); native in the model dtype.
- Bi-encoder, pooled ``h``: ``hps`` = ``h.float() / ‖h.float()‖₂`` and FP32 dot products;
  ``native`` normalises and takes the dot in the model dtype.

Scores come back as float32 numpy arrays in both modes (the native values are exact upcasts of
model-dtype values, so their ties survive).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from steadyrank.serve.runtime.settings import Scoring


def _working(values: torch.Tensor, scoring: Scoring) -> torch.Tensor:
    """The tensor φ is computed on: upcast to FP32 for HPS, unchanged for native."""
    return values.float() if scoring == "hps" else values


def _numpy32(values: torch.Tensor) -> np.ndarray:
    return values.float().cpu().numpy().astype(np.float32, copy=False)


def logit_scores(logits: torch.Tensor, scoring: Scoring) -> np.ndarray:
    """φ of (n, 1) logits (sigmoid) or (n, 2) logits (softmax, probability of column 1), float32 (n,)."""
    if logits.ndim != 2 or logits.shape[1] not in (1, 2):
        raise ValueError(f"expected logits of shape (n, 1) or (n, 2), got {tuple(logits.shape)}")
    z = _working(logits, scoring)
    probs = torch.sigmoid(z[:, 0]) if z.shape[1] == 1 else torch.softmax(z, dim=-1)[:, 1]
    return _numpy32(probs)


def normalise(pooled: torch.Tensor, scoring: Scoring) -> torch.Tensor:
    """Rows divided by their L2 norm: in FP32 for HPS, in the model dtype for native."""
    return F.normalize(_working(pooled, scoring), p=2.0, dim=-1)


def dot_scores(queries: torch.Tensor, documents: torch.Tensor, scoring: Scoring) -> np.ndarray:
    """Row-wise dot products of pooled query and document embeddings (both (n, dim)), float32 (n,).

    Cosine similarity: both sides are normalised with :func:`normalise` in the same mode first.
    """
    q = normalise(queries, scoring)
    d = normalise(documents, scoring)
    return _numpy32((q * d).sum(dim=-1))


def embeddings(pooled: torch.Tensor, scoring: Scoring) -> np.ndarray:
    """Normalised embeddings as float32 numpy (n, dim): FP32-normalised (HPS) or an upcast of the
    model-dtype normalisation (native)."""
    return _numpy32(normalise(pooled, scoring))


def rank_keys(logits: torch.Tensor, scoring: Scoring) -> np.ndarray:
    """The values a ranking sorts by, float32 (n,).

    HPS ranks on the FP32 logit margin — ``z`` for one logit, ``z₁ − z₀`` for two — which orders
    exactly as the FP32 probability wherever that is strictly monotone, and still separates
    candidates whose FP32 sigmoid saturates at 1.0 (``z ≳ 17``). Native ranks on its own scores.
    """
    if scoring == "native":
        return logit_scores(logits, scoring)
    z = logits.float()
    return _numpy32(z[:, 0] if z.shape[1] == 1 else z[:, 1] - z[:, 0])

"""OpenAI ``dimensions``: shortened vectors for Matryoshka embedders (settings
``served.embedder.matryoshka``), refused for the others."""

from __future__ import annotations

import numpy as np

from steadyrank.serve.errors import InvalidInputError


def check_dimensions(dimensions: int | None, dim: int, matryoshka: bool, model: str) -> None:
    if dimensions is None or dimensions == dim:
        return
    if not matryoshka:
        raise InvalidInputError(f"dimensions: {model} has {dim} dimensions and is not declared Matryoshka "
                         f"(served.embedder.matryoshka), so it cannot be shortened; got {dimensions}")
    if not 1 <= dimensions <= dim:
        raise InvalidInputError(f"dimensions: must be between 1 and {dim}, got {dimensions}")


def shorten(vectors: np.ndarray, dimensions: int | None) -> np.ndarray:
    """The first ``dimensions`` values of each row, L2-renormalised in FP32:
    ``u = v[:d] / ‖v[:d]‖₂`` (a zero prefix stays zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if dimensions is None or dimensions >= vectors.shape[1]:
        return vectors
    prefix = vectors[:, :dimensions]
    norms = np.linalg.norm(prefix, axis=1, keepdims=True)
    return np.divide(prefix, norms, out=np.zeros_like(prefix), where=norms > 0)

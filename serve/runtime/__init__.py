"""Scoring runtime: load local models, score with High-Precision Scoring (HPS), rank with tie facts.

>>> from serve.runtime import ModelSettings, load_embedder, load_scorer
>>> embedder = load_embedder(ModelSettings(precision="bf16"))      # bundled all-MiniLM-L6-v2
>>> vectors = embedder.encode(["a text"])                          # float32, L2-normalised in FP32
>>> scorer = load_scorer(ModelSettings(path="/models/bge-reranker", precision="bf16"))
>>> out = scorer.rerank("query", ["doc a", "doc b"], top_n=1)      # RerankOutput
"""

from serve.runtime.embedder import Embedder
from serve.runtime.errors import InvalidInputError, ModelLoadError, UnsupportedModelError
from serve.runtime.factory import load_embedder, load_scorer
from serve.runtime.scorer import RerankOutput, Scored, Scorer
from serve.runtime.settings import ModelSettings, bundled_embedder_path

__all__ = [
    "Embedder",
    "InvalidInputError",
    "ModelLoadError",
    "ModelSettings",
    "RerankOutput",
    "Scored",
    "Scorer",
    "UnsupportedModelError",
    "bundled_embedder_path",
    "load_embedder",
    "load_scorer",
]

"""Scoring runtime: load local models, score with High-Precision Scoring (HPS), rank with tie facts.

>>> from steadyrank.serve.runtime import ModelSettings, load_embedder, load_scorer
>>> embedder = load_embedder(ModelSettings(precision="bf16"))      # bundled all-MiniLM-L6-v2
>>> vectors = embedder.encode(["a text"])                          # float32, L2-normalised in FP32
>>> scorer = load_scorer(ModelSettings(path="/models/bge-reranker", precision="bf16"))
>>> out = scorer.rerank("query", ["doc a", "doc b"], top_n=1)      # RerankOutput
"""

from typing import TYPE_CHECKING

from steadyrank.lazy import lazy_exports

if TYPE_CHECKING:  # what a type checker sees; at run time __getattr__ below imports each name on first use
    from steadyrank.serve.errors import InvalidInputError, ModelLoadError, UnsupportedModelError
    from steadyrank.serve.runtime.embedder import Embedder
    from steadyrank.serve.runtime.factory import load_embedder, load_scorer
    from steadyrank.serve.runtime.scorer import RerankOutput, Scored, Scorer
    from steadyrank.serve.runtime.settings import ModelSettings, bundled_embedder_path

#: Public name → defining module. Imported on first use (PEP 562), so that importing the settings
#: or errors (as the server's ingress and CLI do) does not load torch.
_EXPORTS = {
    "Embedder": "steadyrank.serve.runtime.embedder",
    "InvalidInputError": "steadyrank.serve.errors",
    "ModelLoadError": "steadyrank.serve.errors",
    "UnsupportedModelError": "steadyrank.serve.errors",
    "load_embedder": "steadyrank.serve.runtime.factory",
    "load_scorer": "steadyrank.serve.runtime.factory",
    "RerankOutput": "steadyrank.serve.runtime.scorer",
    "Scored": "steadyrank.serve.runtime.scorer",
    "Scorer": "steadyrank.serve.runtime.scorer",
    "ModelSettings": "steadyrank.serve.runtime.settings",
    "bundled_embedder_path": "steadyrank.serve.runtime.settings",
}

# sorted(_EXPORTS), spelled out: a type checker reads only a literal __all__
__all__ = [
    "Embedder", "InvalidInputError", "ModelLoadError", "ModelSettings", "RerankOutput", "Scored", "Scorer",
    "UnsupportedModelError", "bundled_embedder_path", "load_embedder", "load_scorer",
]
__getattr__ = lazy_exports(__name__, _EXPORTS)

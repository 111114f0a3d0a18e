"""Entry points: load an embedder or a scorer from :class:`ModelSettings`."""

from __future__ import annotations

from pathlib import Path

from steadyrank.serve.errors import UnsupportedModelError
from steadyrank.serve.runtime.embedder import Embedder
from steadyrank.serve.runtime.inspection import inspect_model, model_id
from steadyrank.serve.runtime.scorer import BiEncoderScorer, PairScorer, Scorer
from steadyrank.serve.runtime.settings import ModelSettings


def load_embedder(settings: ModelSettings | None = None) -> Embedder:
    """Load a bi-encoder as an :class:`Embedder` (default: the bundled all-MiniLM-L6-v2)."""
    settings = settings or ModelSettings()
    spec = inspect_model(settings)
    if spec.kind != "bi-encoder":
        raise UnsupportedModelError(f"{spec.path} is a {spec.kind}: an embedder needs a bi-encoder")
    if settings.backend != "transformers":
        raise UnsupportedModelError("embedders run on the 'transformers' backend only")
    return Embedder(spec, settings, model_id(spec))


def load_scorer(settings: ModelSettings | None = None, calibration: Path | None = None) -> Scorer:
    """Load any supported model as a :class:`Scorer` (a bi-encoder scores by FP32 dot product).

    ``certify_cutoffs`` gets its score error bound from ``score_error_bound``, else from the cache file
    ``calibration`` (or measures one, cached there when given: :func:`serve.runtime.calibrated.certify`).
    With ``calibration``, ``precision: auto`` of a
    cross-encoder or causal-LM reranker is measured (:func:`serve.runtime.calibrated.load_calibrated`); without it, or for a bi-encoder
    (whose vectors must match the index's, built by the embedder), the CPU's or GPU's flags decide."""
    settings = settings or ModelSettings()
    spec = inspect_model(settings)
    scorer: Scorer
    if spec.kind == "bi-encoder":
        if settings.backend != "transformers":
            raise UnsupportedModelError("bi-encoders run on the 'transformers' backend only")
        scorer = BiEncoderScorer(spec, settings, model_id(spec))
    elif calibration is not None and settings.precision == "auto":
        from steadyrank.serve.runtime.calibrated import load_calibrated

        return load_calibrated(spec, settings, calibration)  # certified there, from its own measurement
    else:
        scorer = PairScorer(spec, settings, model_id(spec))
    if settings.certify_cutoffs:
        from steadyrank.serve.runtime.calibrated import certify

        certify(scorer, calibration)
    return scorer

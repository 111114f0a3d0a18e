"""``retrieval`` stays below ``serve`` in the layering: no torch, ray or serve on import."""

from __future__ import annotations


def test_retrieval_imports_no_model_runtime(fresh_imports):
    """Importing ``steadyrank.retrieval`` (with its calibration and pipeline) in a fresh interpreter
    loads no model runtime and nothing of ``serve`` (the shared ``fresh_imports`` interpreter)."""
    bad = sorted(m for m in fresh_imports["after_retrieval"]
                 if m.split(".")[0] in ("torch", "ray", "transformers") or m.startswith("steadyrank.serve"))
    assert bad == []

"""Δ-margin probes (proper-name identity) and conversational-noise probes of an embedder or reranker.

Pure parts (no model runtime): :mod:`.levenshtein`, :mod:`.bundles` (5-item bundles, templates),
:mod:`.ablations`, :mod:`.margins` (Δname/Δtopic/Δboth, ΔΔ%, summaries), :mod:`.noise` (the
measurement templates), :mod:`.run` (bundles × ablations through any async similarity function),
:mod:`.remote` (similarities from a running server over HTTP). ``steadyrank probe`` and the shadow
evaluator's live probes both use them.
"""

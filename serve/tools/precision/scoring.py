"""Score every candidate under every regime with one forward pass per model dtype.

Regimes that share a dtype (``bf16`` and ``bf16+hps``) share the forward pass: they differ only in
where φ runs (see :mod:`serve.runtime.hps`). A bi-encoder encodes each distinct text (queries and
candidate documents) once per dtype; a pair model runs each (query, document) pair once per dtype.
The values returned are rank keys (``hps.rank_keys`` for pair models, dot products for bi-encoders).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import torch

from steadyrank.serve.runtime import ModelSettings, hps
from steadyrank.serve.runtime.factory import load_scorer
from steadyrank.serve.runtime.scorer import BiEncoderScorer, PairScorer
from steadyrank.serve.runtime.settings import Precision
from steadyrank.serve.tools.precision.candidates import Candidates
from steadyrank.serve.tools.precision.regimes import Regime

RegimeKeys = dict[str, dict[str, np.ndarray]]  # regime name → qid → keys in candidate order


class PooledStore:
    """Pooled bi-encoder embeddings per dtype; each distinct text is encoded at most once per dtype."""

    def __init__(self, base: ModelSettings, show_progress: bool) -> None:
        self.base = base
        self.show_progress = show_progress
        self._rows: dict[Precision, dict[str, int]] = {}
        self._pooled: dict[Precision, torch.Tensor] = {}
        self.encoded = 0  # texts encoded, all dtypes together

    def pooled(self, precision: Precision, texts: Iterable[str]) -> torch.Tensor:
        """Pooled embeddings (model dtype) of ``texts``, encoding only the ones not seen before."""
        wanted = list(texts)
        rows = self._rows.setdefault(precision, {})
        missing = list(dict.fromkeys(t for t in wanted if t not in rows))
        if missing:
            scorer = load_scorer(self.base.model_copy(update={"precision": precision}))
            assert isinstance(scorer, BiEncoderScorer)
            new, _ = scorer.embedder.pooled(missing, show_progress=self.show_progress)
            old = self._pooled.get(precision)
            self._pooled[precision] = new if old is None else torch.cat([old, new])
            rows.update({t: len(rows) + i for i, t in enumerate(missing)})
            self.encoded += len(missing)
        return self._pooled[precision][[rows[t] for t in wanted]]

    def embed_fp32(self, texts: list[str]) -> np.ndarray:
        """FP32 embeddings normalised in FP32 (for exact dense first-stage search)."""
        return hps.embeddings(self.pooled("fp32", texts), "hps")


def _by_precision(regimes: list[Regime]) -> dict[Precision, list[Regime]]:
    groups: dict[Precision, list[Regime]] = {}
    for regime in regimes:
        groups.setdefault(regime.precision, []).append(regime)
    return groups


def bi_encoder_keys(
    store: PooledStore, regimes: list[Regime], queries: Mapping[str, str], texts: Mapping[str, str],
    candidates: Candidates,
) -> RegimeKeys:
    """Dot-product keys: each query's pooled vector against its candidates', φ per regime."""
    out: RegimeKeys = {r.name: {} for r in regimes}
    for precision, group in _by_precision(regimes).items():
        needed = [queries[q] for q in candidates] + [texts[d] for docs in candidates.values() for d in docs]
        store.pooled(precision, needed)  # one forward pass over everything missing
        for qid, docs in candidates.items():
            if not docs:
                for regime in group:
                    out[regime.name][qid] = np.zeros(0, dtype=np.float32)
                continue
            q = store.pooled(precision, [queries[qid]]).expand(len(docs), -1)
            d = store.pooled(precision, [texts[doc] for doc in docs])
            for regime in group:
                out[regime.name][qid] = hps.dot_scores(q, d, regime.scoring)
    return out


def pair_keys(
    base: ModelSettings, regimes: list[Regime], queries: Mapping[str, str], texts: Mapping[str, str],
    candidates: Candidates, show_progress: bool,
) -> tuple[RegimeKeys, int]:
    """Cross-encoder / causal-LM keys: all pairs in one forward pass per dtype; returns keys and pairs run."""
    pairs = [(queries[qid], texts[d]) for qid, docs in candidates.items() for d in docs]
    bounds = np.cumsum([0] + [len(docs) for docs in candidates.values()])
    out: RegimeKeys = {r.name: {} for r in regimes}
    runs = 0
    for precision, group in _by_precision(regimes).items():
        scorer = load_scorer(base.model_copy(update={"precision": precision}))
        assert isinstance(scorer, PairScorer)
        raw = scorer.backend.pair_logits(pairs, show_progress=show_progress)[0] if pairs else torch.zeros(0, 1)
        runs += len(pairs)
        for regime in group:
            keys = hps.rank_keys(raw, regime.scoring)
            for i, qid in enumerate(candidates):
                out[regime.name][qid] = keys[bounds[i] : bounds[i + 1]]
        del scorer
    return out, runs

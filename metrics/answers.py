"""Acc|Hit@K: answer accuracy on the queries whose top K holds the whole gold evidence set.

Per query q, ``Hit@K`` is 0 or 1 (:mod:`steadyrank.metrics.registry`, metric ``hit``) and ``a_q``
says whether the generated answer was correct (0 or 1, from an answers file). ``Acc|Hit@K =
Σ_q a_q·Hit_q / Σ_q Hit_q`` over the queries with an answer; NA when no query hits.

Under ties each query's Hit is a Bernoulli variable with p_q = E[Hit@K]_q, independent across
queries (every query's tie orders are drawn on their own). So with A = Σ_{a_q = 1} Hit_q and
B = Σ_{a_q = 0} Hit_q, two independent Poisson-binomial counts,
``E[Acc|Hit@K | A + B > 0] = Σ_{i + j > 0} P(A = i) P(B = j) · i / (i + j) / (1 − P(A = 0) P(B = 0))``,
exact from the two distributions (dynamic programming over the queries, O(n²)). The max sets every
query whose Hit can be 1 and whose answer is right to 1 and every wrong one that can be 0 to 0
(the min the other way round); the oblivious value and PROC use each query's Hit on that order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ConditionalAccuracy:
    """Acc|Hit@K statistics; NaN where no query can hit. ``expected_hits`` = Σ_q E[Hit@K]_q."""

    expected: float
    min: float
    max: float
    oblivious: float
    proc: float
    n_queries: int
    expected_hits: float

    def as_dict(self) -> dict[str, float | int | None]:
        def clean(x: float) -> float | None:
            return None if np.isnan(x) else x

        return {"expected": clean(self.expected), "min": clean(self.min), "max": clean(self.max),
                "oblivious": clean(self.oblivious), "proc": clean(self.proc), "n_queries": self.n_queries,
                "expected_hits": self.expected_hits}


def poisson_binomial(probabilities: np.ndarray) -> np.ndarray:
    """P(Σ X_i = n) for n = 0..len, X_i independent Bernoulli(p_i): (len + 1,)."""
    pmf = np.zeros(probabilities.size + 1)
    pmf[0] = 1.0
    for i, p in enumerate(probabilities.tolist()):
        pmf[1 : i + 2] = pmf[1 : i + 2] * (1 - p) + pmf[: i + 1] * p
        pmf[0] *= 1 - p
    return pmf


def _ratio(hits: np.ndarray, correct: np.ndarray) -> float:
    total = float(hits.sum())
    return float((hits * correct).sum()) / total if total > 0 else float("nan")


def _expected(p: np.ndarray, correct: np.ndarray) -> float:
    right, wrong = poisson_binomial(p[correct]), poisson_binomial(p[~correct])
    none = right[0] * wrong[0]
    if none >= 1.0:
        return float("nan")
    i = np.arange(right.size)[:, None]
    j = np.arange(wrong.size)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(i + j > 0, i / (i + j), 0.0)
    return float(right @ share @ wrong / (1.0 - none))


def _extreme(low: np.ndarray, high: np.ndarray, correct: np.ndarray, best: bool) -> float:
    """The largest (``best``) or smallest ratio when each query's Hit may be anything in [low, high]."""
    if best:
        hits = np.where(correct, high, low)
        if hits.sum() == 0:  # every query that can hit is answered wrongly: one must hit
            hits = np.where(correct, high, high)
    else:
        hits = np.where(correct, low, high)
        if hits.sum() == 0:
            hits = np.where(correct, high, high)
    return _ratio(hits, correct)


def accuracy_given_hit(expected: np.ndarray, low: np.ndarray, high: np.ndarray, oblivious: np.ndarray,
                       proc: np.ndarray, correct: np.ndarray) -> ConditionalAccuracy:
    """Acc|Hit@K from per-query Hit@K statistics (NaN = NA, left out) and answer correctness (bool)."""
    keep = ~np.isnan(expected)
    p, lo, hi = expected[keep], low[keep], high[keep]
    right = np.asarray(correct, dtype=bool)[keep]
    if hi.sum() == 0:
        nothing = float("nan")
        return ConditionalAccuracy(nothing, nothing, nothing, nothing, nothing, int(keep.sum()), 0.0)
    return ConditionalAccuracy(
        _expected(p, right), _extreme(lo, hi, right, best=False), _extreme(lo, hi, right, best=True),
        _ratio(oblivious[keep], right), _ratio(proc[keep], right), int(keep.sum()), float(p.sum()),
    )

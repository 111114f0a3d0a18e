"""One calibration: check and split the judged pairs, score them, fit on one half, assess on the other."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from steadyrank.serve.runtime.score_calibration import platt_probability
from steadyrank.serve.tools.score_calibration.fit import PlattFit, check_held_out, check_outcomes, fit_platt
from steadyrank.serve.tools.score_calibration.pairs import JudgedPairs, split_by_query
from steadyrank.serve.tools.score_calibration.report import held_out_metrics

#: ``(query, documents) → (rank keys float32 (n,), relevance scores float32 (n,))``: one reranker call.
ScoreFn = Callable[[str, list[str]], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Plan:
    """The judged pairs' outcomes (1 = grade ≥ ``threshold``) and the masks of the two halves."""

    threshold: int
    relevant: np.ndarray  # int64 (n,)
    fit: np.ndarray  # bool (n,)
    held_out: np.ndarray  # bool (n,)
    seed: int
    fit_fraction: float


@dataclass(frozen=True)
class Fitted:
    """The fitted map, the held-out metrics and the split facts (``fit`` in the calibration file)."""

    platt: PlattFit
    held_out: dict[str, Any]
    fit: dict[str, Any]


def plan(pairs: JudgedPairs, *, threshold: int, fit_fraction: float, seed: int) -> Plan:
    """The outcomes and the split by query (:func:`~.pairs.split_by_query`), checked before any model
    work: ValueError for one class only, too few judgments in a half, or too few of a class in the fit half."""
    relevant = (pairs.grades >= threshold).astype(np.int64)
    check_outcomes(relevant, "the golden set")
    fit, held = split_by_query(pairs.query_ids, fit_fraction, seed)
    check_outcomes(relevant[fit], "the fit half")
    check_held_out(int(held.sum()))
    return Plan(threshold=threshold, relevant=relevant, fit=fit, held_out=held, seed=seed, fit_fraction=fit_fraction)


def score_pairs(pairs: JudgedPairs, score: ScoreFn,
                progress: Callable[[list[str]], Iterable[str]] = iter) -> tuple[np.ndarray, np.ndarray]:
    """``(keys, relevance scores)`` of every pair, one ``score`` call per query (``progress`` wraps
    the queries, e.g. in a progress bar)."""
    keys = np.zeros(len(pairs), np.float32)
    scores = np.zeros(len(pairs), np.float32)
    rows: dict[str, list[int]] = {}
    for i, query_id in enumerate(pairs.query_ids):
        rows.setdefault(query_id, []).append(i)
    for query_id in progress(list(rows)):
        index = rows[query_id]
        keys[index], scores[index] = score(pairs.queries[index[0]], [pairs.texts[i] for i in index])
    return keys, scores


def fit_and_assess(pairs: JudgedPairs, keys: np.ndarray, scores: np.ndarray, split: Plan, *, n_bins: int) -> Fitted:
    """Fit the Platt map on the fit half's keys and assess it on the held-out half (ValueError when
    the fitted map is not increasing)."""
    fit, held, relevant = split.fit, split.held_out, split.relevant
    platt = fit_platt(keys[fit], relevant[fit])

    def queries(mask: np.ndarray) -> list[str]:
        return sorted({q for q, inside in zip(pairs.query_ids, mask, strict=True) if inside})

    metrics = held_out_metrics(platt_probability(keys[held], platt.slope, platt.intercept), relevant[held],
                               n_bins=n_bins, queries=len(queries(held)), raw_scores=scores[held],
                               base_rate=platt.positives / platt.n)
    facts = {"seed": split.seed, "fit_fraction": split.fit_fraction, "fit_pairs": platt.n,
             "fit_relevant": platt.positives, "fit_query_ids": queries(fit),
             "key_range": [float(keys.min()), float(keys.max())],
             "solver": "scikit-learn LogisticRegression (C=inf: unpenalised, lbfgs, tol 1e-10)"}
    return Fitted(platt=platt, held_out=metrics, fit=facts)

"""The Platt fit: a logistic regression of the outcome on the FP32 rank key, unpenalised
(scikit-learn's ``LogisticRegression(C=inf)``, L-BFGS), refused unless strictly increasing.

Maximises ``Σ_i y_i log σ(a·x_i + b) + (1 − y_i) log(1 − σ(a·x_i + b))`` over the fit half's keys
``x`` and outcomes ``y`` (1 = rubric grade ≥ the threshold). Platt's original method also smooths the
targets; plain maximum likelihood is used here so the fit can be checked against a closed form.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The fewest judged pairs a half may hold, and the fewest of each class the fit half needs.
MIN_PAIRS = 20
MIN_PER_CLASS = 5


@dataclass(frozen=True)
class PlattFit:
    """``σ(slope·key + intercept)``; ``n`` pairs and ``positives`` among them."""

    slope: float
    intercept: float
    n: int
    positives: int


def check_outcomes(relevant: np.ndarray, what: str) -> None:
    """Refuse ``what``'s pairs when they are fewer than :data:`MIN_PAIRS`, of one class only, or hold
    fewer than :data:`MIN_PER_CLASS` of either class: no map can be fitted on one class."""
    n, positives = int(relevant.size), int(relevant.sum())
    if n < MIN_PAIRS:
        raise ValueError(f"too few judgments: {what} holds {n} judged pairs, at least {MIN_PAIRS} are needed "
                         "(judge more queries, or change --fit-fraction)")
    if positives == 0 or positives == n:
        label = "relevant" if positives == n else "not relevant"
        raise ValueError(f"one class only: every one of the {n} judged pairs of {what} is {label} at this "
                         "threshold; change --threshold or judge documents of both kinds")
    if min(positives, n - positives) < MIN_PER_CLASS:
        raise ValueError(f"too few judgments of one class: {what} has {positives} relevant and "
                         f"{n - positives} not relevant pairs, at least {MIN_PER_CLASS} of each are needed")


def check_held_out(n: int) -> None:
    """Refuse a held-out half with fewer than :data:`MIN_PAIRS` pairs (its ECE would be noise)."""
    if n < MIN_PAIRS:
        raise ValueError(f"too few judgments: the held-out half holds {n} judged pairs, at least {MIN_PAIRS} are "
                         "needed (judge more queries, or change --fit-fraction)")


def fit_platt(keys: np.ndarray, relevant: np.ndarray) -> PlattFit:
    """The maximum-likelihood logistic map of ``relevant`` (0/1) on ``keys`` (module docstring).
    ValueError when the fitted slope is not > 0 (the keys do not rank relevant pairs higher)."""
    from sklearn.linear_model import LogisticRegression

    x = np.asarray(keys, dtype=np.float64).reshape(-1, 1)
    y = np.asarray(relevant, dtype=np.int64)
    check_outcomes(y, "the fit half")
    model = LogisticRegression(C=np.inf, solver="lbfgs", tol=1e-10, max_iter=10_000).fit(x, y)  # C = ∞: no penalty
    slope, intercept = float(model.coef_[0, 0]), float(model.intercept_[0])
    if not slope > 0:
        raise ValueError(f"the fitted map is not increasing (slope {slope:.4g} ≤ 0): on this golden set the model's "
                         "keys do not rank relevant documents above the others, so no calibration of them can keep "
                         "the ranking; check the model, the corpus and --threshold")
    return PlattFit(slope=slope, intercept=intercept, n=int(y.size), positives=int(y.sum()))

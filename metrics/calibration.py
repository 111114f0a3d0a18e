"""Calibration of probabilities against binary outcomes: reliability bins, ECE and the Brier score.

Inputs: predicted probabilities ``p`` in [0, 1] and outcomes ``y`` in {0, 1}, one per judged pair.

- Bins: ``n_bins`` equal-width bins over [0, 1]; bin ``b`` (0-based) holds the ``p`` in
  ``[b/n_bins, (b+1)/n_bins)``, the last bin also holds ``p = 1``.
- ECE (expected calibration error, the L1 form): ``Σ_b (n_b / N) · |ȳ_b − p̄_b|`` over the non-empty
  bins, with ``n_b`` the pairs in bin b, ``ȳ_b`` their share of relevant outcomes and ``p̄_b`` their
  mean predicted probability. Unit: probability (0 = perfectly calibrated on these bins).
- Brier score: ``(1/N) Σ_i (p_i − y_i)²``. Unit: squared probability (0 best, 0.25 = always 0.5).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Equal-width bins of the reliability diagram and of ECE unless told otherwise.
DEFAULT_BINS = 10


@dataclass(frozen=True)
class ReliabilityBin:
    """One bin of a reliability diagram: its range, its pairs, their mean prediction and outcome rate."""

    lower: float
    upper: float
    count: int
    mean_predicted: float | None  # None for an empty bin
    observed_rate: float | None

    def to_json(self) -> dict[str, float | int | None]:
        return {"lower": self.lower, "upper": self.upper, "count": self.count,
                "mean_predicted": self.mean_predicted, "observed_rate": self.observed_rate}


def _checked(p: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p, y = np.asarray(p, dtype=np.float64), np.asarray(y)
    if p.ndim != 1 or p.shape != y.shape:
        raise ValueError(f"probabilities and outcomes must be 1-D of one length, got {p.shape} and {y.shape}")
    if p.size == 0:
        raise ValueError("no (probability, outcome) pair to assess")
    if not np.all((p >= 0) & (p <= 1)):
        raise ValueError("probabilities must lie in [0, 1]")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("outcomes must be 0 or 1")
    return p, y.astype(np.float64)


def reliability_bins(p: np.ndarray, y: np.ndarray, n_bins: int = DEFAULT_BINS) -> list[ReliabilityBin]:
    """The ``n_bins`` equal-width bins of ``p`` with their counts, mean predictions and outcome rates."""
    if n_bins < 1:
        raise ValueError(f"n_bins must be ≥ 1, got {n_bins}")
    p, y = _checked(p, y)
    index = np.minimum((p * n_bins).astype(np.int64), n_bins - 1)
    counts = np.bincount(index, minlength=n_bins)
    sum_p = np.bincount(index, weights=p, minlength=n_bins)
    sum_y = np.bincount(index, weights=y, minlength=n_bins)
    return [ReliabilityBin(lower=b / n_bins, upper=(b + 1) / n_bins, count=int(counts[b]),
                           mean_predicted=float(sum_p[b] / counts[b]) if counts[b] else None,
                           observed_rate=float(sum_y[b] / counts[b]) if counts[b] else None)
            for b in range(n_bins)]


def expected_calibration_error(p: np.ndarray, y: np.ndarray, n_bins: int = DEFAULT_BINS) -> float:
    """ECE over ``n_bins`` equal-width bins (module docstring)."""
    bins = reliability_bins(p, y, n_bins)
    total = sum(b.count for b in bins)
    return float(sum(b.count / total * abs(b.observed_rate - b.mean_predicted)
                     for b in bins if b.observed_rate is not None and b.mean_predicted is not None))


def brier_score(p: np.ndarray, y: np.ndarray) -> float:
    """Mean squared difference between predicted probability and outcome."""
    p, y = _checked(p, y)
    return float(np.mean((p - y) ** 2))

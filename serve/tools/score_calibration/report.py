"""What ``steadyrank calibrate`` reports on the held-out half (never on the pairs it fitted on)."""

from __future__ import annotations

from typing import Any

import numpy as np

from steadyrank.metrics.calibration import brier_score, expected_calibration_error, reliability_bins


def held_out_metrics(calibrated: np.ndarray, relevant: np.ndarray, *, n_bins: int, queries: int,
                     raw_scores: np.ndarray, base_rate: float) -> dict[str, Any]:
    """ECE (``n_bins`` equal-width bins over [0, 1], :mod:`metrics.calibration`), Brier score and the
    reliability bins of the calibrated scores; beside them, for comparison, the model's own
    ``relevance_score`` read as a probability (where it lies in [0, 1]; a bi-encoder's cosine need
    not) and the constant prediction of the fit half's relevant rate (Brier only: its ECE is the
    difference of the two halves' rates)."""
    y = np.asarray(relevant, dtype=np.int64)
    raw = np.asarray(raw_scores, dtype=np.float64)
    raw_is_probability = bool(np.all((raw >= 0) & (raw <= 1)))
    return {
        "pairs": int(y.size), "queries": queries, "relevant": int(y.sum()), "bins": n_bins,
        "binning": f"{n_bins} equal-width bins over [0, 1]",
        "ece": expected_calibration_error(calibrated, y, n_bins), "brier": brier_score(calibrated, y),
        "reliability": [b.to_json() for b in reliability_bins(calibrated, y, n_bins)],
        "relevance_score": ({"ece": expected_calibration_error(raw, y, n_bins), "brier": brier_score(raw, y)}
                            if raw_is_probability else None),
        "base_rate_brier": brier_score(np.full(y.size, base_rate), y),
    }

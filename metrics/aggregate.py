"""Aggregation over queries: macro means with NA handling, bootstrap confidence intervals.

NA values are NaN. A macro mean averages the queries where the metric is defined and reports
how many were valid and how many NA. Bootstrap CIs resample queries with replacement
(percentile method); the paired bootstrap resamples the same queries for both runs, so the CI
is of the mean per-query difference ``b − a``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MacroMean:
    """Mean over queries where the value is defined, with the valid and NA counts."""

    mean: float
    n_valid: int
    n_na: int


def macro_mean(values: np.typing.ArrayLike) -> MacroMean:
    """Mean of the non-NaN entries (NaN if there are none)."""
    values = np.asarray(values, dtype=np.float64)
    defined = ~np.isnan(values)
    n_valid = int(defined.sum())
    mean = float(values[defined].mean()) if n_valid else float("nan")
    return MacroMean(mean, n_valid, int(values.size - n_valid))


@dataclass(frozen=True)
class ConfidenceInterval:
    """A point estimate and its percentile bootstrap interval at ``confidence``."""

    estimate: float
    low: float
    high: float
    confidence: float
    n: int


def _percentile_interval(
    per_query: np.ndarray, n_resamples: int, confidence: float, seed: int | None
) -> ConfidenceInterval:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    n = per_query.size
    if n == 0:
        nan = float("nan")
        return ConfidenceInterval(nan, nan, nan, confidence, 0)
    rng = np.random.default_rng(seed)
    means = per_query[rng.integers(0, n, size=(n_resamples, n))].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return ConfidenceInterval(float(per_query.mean()), float(low), float(high), confidence, n)


def bootstrap_ci(
    values: np.typing.ArrayLike, *, n_resamples: int = 2000, confidence: float = 0.95, seed: int | None = 0
) -> ConfidenceInterval:
    """Percentile bootstrap CI of the macro mean over the defined (non-NaN) queries."""
    values = np.asarray(values, dtype=np.float64)
    return _percentile_interval(values[~np.isnan(values)], n_resamples, confidence, seed)


def paired_bootstrap(
    baseline: np.typing.ArrayLike,
    candidate: np.typing.ArrayLike,
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> ConfidenceInterval:
    """Paired bootstrap CI of mean(candidate − baseline) over queries defined in both."""
    a = np.asarray(baseline, dtype=np.float64)
    b = np.asarray(candidate, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired runs must cover the same queries: shapes {a.shape} and {b.shape}")
    both = ~np.isnan(a) & ~np.isnan(b)
    return _percentile_interval(b[both] - a[both], n_resamples, confidence, seed)

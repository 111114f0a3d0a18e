"""Binomial coefficients for the closed forms over tie groups, in log space (no overflow at any group size)."""

from __future__ import annotations

import numpy as np


def log_factorials(n_max: int) -> np.ndarray:
    """ln(n!) for n = 0..n_max."""
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n_max + 1)))])


def binomial(log_fact: np.ndarray, n: np.ndarray, k: np.ndarray) -> np.ndarray:
    """C(n, k) elementwise for integer-valued arrays, 0 outside 0 ≤ k ≤ n (``log_fact`` covers max n)."""
    ok = (k >= 0) & (k <= n)
    n_safe = np.where(ok, n, 0).astype(np.int64)
    k_safe = np.where(ok, k, 0).astype(np.int64)
    return np.where(ok, np.exp(log_fact[n_safe] - log_fact[k_safe] - log_fact[n_safe - k_safe]), 0.0)


def binomial_ratio(log_fact: np.ndarray, n1: np.ndarray, k1: np.ndarray, n2: np.ndarray, k2: np.ndarray) -> np.ndarray:
    """C(n1, k1) / C(n2, k2) elementwise (0 where the numerator is 0; C(n2, k2) must be positive)."""
    ok = (k1 >= 0) & (k1 <= n1)
    n1s, k1s = np.where(ok, n1, 0).astype(np.int64), np.where(ok, k1, 0).astype(np.int64)
    n2s = np.maximum(n2, 0).astype(np.int64)
    k2s = np.minimum(np.maximum(k2, 0), n2s).astype(np.int64)
    log_num = log_fact[n1s] - log_fact[k1s] - log_fact[n1s - k1s]
    log_den = log_fact[n2s] - log_fact[k2s] - log_fact[n2s - k2s]
    return np.where(ok, np.exp(log_num - log_den), 0.0)

"""Multiple-testing control: adjusted p-values of Holm (1979) and Benjamini–Hochberg (1995).

Hand-written (a few lines each) because statsmodels, which has both, is not a dependency, and
scipy (one) has only Benjamini–Hochberg, from 1.11 on. ``tests/quality/test_multitest.py`` checks
Holm against closed testing with Bonferroni local tests (its definition) by brute force over every
subset, and Benjamini–Hochberg against its step-up definition and scipy's
``false_discovery_control``.

With ``p_(1) ≤ … ≤ p_(m)`` the sorted p-values of ``m`` hypotheses, a hypothesis is rejected at
level α when its adjusted p-value is ≤ α:

- Holm (family-wise error ≤ α under any dependence): ``p̃_(i) = max_{j ≤ i} min(1, (m − j + 1) p_(j))``;
- Benjamini–Hochberg (false discovery rate ≤ α under independence or positive dependence):
  ``p̃_(i) = min_{j ≥ i} min(1, m p_(j) / j)``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Correction = Literal["holm", "bh"]


def adjusted_pvalues(pvalues: np.typing.ArrayLike, method: Correction) -> np.ndarray:
    """Adjusted p-values (module docstring) in the input's order; an empty input gives an empty array."""
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 1 or np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("p-values must be a 1-D array of numbers in [0, 1]")
    m = p.size
    order = np.argsort(p, kind="stable")
    ranked = p[order]
    position = np.arange(1, m + 1)
    if method == "holm":
        adjusted = np.maximum.accumulate(np.minimum(1.0, (m - position + 1) * ranked))
    elif method == "bh":
        adjusted = np.minimum.accumulate(np.minimum(1.0, m * ranked / position)[::-1])[::-1]
    else:
        raise ValueError(f"unknown correction {method!r} (holm, bh)")
    out = np.empty(m)
    out[order] = adjusted
    return out

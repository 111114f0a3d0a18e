"""Holm and Benjamini–Hochberg adjusted p-values (serve/server/quality/multitest.py) against brute
force: Holm as closed testing with Bonferroni local tests over every subset, BH as its step-up
definition and scipy's ``false_discovery_control``; and the segments' sign-flip p-value against
its exact enumeration."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from steadyrank.serve.server.quality.multitest import adjusted_pvalues
from steadyrank.serve.server.quality.segment_verdicts import sign_flip_pvalue

ALPHAS = (0.01, 0.05, 0.1, 0.25)


def _holm_closed_testing(p: np.ndarray, alpha: float) -> np.ndarray:
    """Reject H_i iff every intersection hypothesis containing i is rejected by Bonferroni."""
    m = p.size
    reject = np.zeros(m, bool)
    for i in range(m):
        others = [j for j in range(m) if j != i]
        reject[i] = all(min(p[[i, *subset]]) <= alpha / (len(subset) + 1)
                        for r in range(m) for subset in itertools.combinations(others, r))
    return reject


def _bh_step_up(p: np.ndarray, alpha: float) -> np.ndarray:
    m = p.size
    ranked = np.sort(p)
    passing = [k for k in range(1, m + 1) if ranked[k - 1] <= k * alpha / m]
    return p <= ranked[max(passing) - 1] if passing else np.zeros(m, bool)


def _random_pvalues(seed: int) -> np.ndarray:
    """1–7 p-values, some small, some tied."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 8))
    p = rng.choice([rng.uniform(0, 0.05), rng.uniform(0, 1)], size=m) * rng.uniform(0, 1, m)
    p[rng.random(m) < 0.2] = p[0]  # ties
    return p


@pytest.mark.parametrize("seed", range(40))
def test_holm_and_bh_reject_what_their_definitions_reject(seed: int) -> None:
    p = _random_pvalues(seed)
    for alpha in ALPHAS:
        np.testing.assert_array_equal(adjusted_pvalues(p, "holm") <= alpha, _holm_closed_testing(p, alpha))
        np.testing.assert_array_equal(adjusted_pvalues(p, "bh") <= alpha, _bh_step_up(p, alpha))


@pytest.mark.skipif(not hasattr(stats, "false_discovery_control"),
                    reason="scipy.stats.false_discovery_control needs scipy >= 1.11 (the floor is 1.10)")
@pytest.mark.parametrize("seed", range(40))
def test_bh_adjusted_pvalues_equal_scipys(seed: int) -> None:
    p = _random_pvalues(seed)
    np.testing.assert_allclose(adjusted_pvalues(p, "bh"), stats.false_discovery_control(p, method="bh"))


def test_bad_pvalues_are_refused() -> None:
    with pytest.raises(ValueError):
        adjusted_pvalues([0.1, 1.5], "holm")
    with pytest.raises(ValueError):
        adjusted_pvalues([0.1], "bonferroni")  # type: ignore[arg-type]
    assert adjusted_pvalues([], "holm").size == 0


@pytest.mark.parametrize("alternative", ["less", "greater"])
def test_sign_flip_pvalue_is_the_exact_enumeration(alternative: str) -> None:
    x = np.array([0.3, -0.1, -0.4, -0.2, 0.05, -0.3, -0.25])
    means = np.array([np.mean(x * signs) for signs in itertools.product([1, -1], repeat=x.size)])
    observed = x.mean()
    exact = np.mean(means <= observed + 1e-12) if alternative == "less" else np.mean(means >= observed - 1e-12)
    assert sign_flip_pvalue(x, alternative, 1000, 0) == pytest.approx(exact)  # type: ignore[arg-type]

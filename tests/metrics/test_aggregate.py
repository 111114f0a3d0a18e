"""Macro means with NA, percentile bootstrap and paired bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from steadyrank.metrics import bootstrap_ci, macro_mean, paired_bootstrap


def test_macro_mean_skips_na_and_counts_it():
    result = macro_mean([0.5, np.nan, 1.0])
    assert result.mean == 0.75 and result.n_valid == 2 and result.n_na == 1
    assert np.isnan(macro_mean([np.nan]).mean)


def test_bootstrap_is_seeded_and_brackets_the_mean():
    values = np.random.default_rng(3).random(200)
    a = bootstrap_ci(values, seed=11, n_resamples=1000)
    b = bootstrap_ci(values, seed=11, n_resamples=1000)
    assert a == b
    assert a.low < values.mean() < a.high and a.n == 200
    # the interval's width is close to the normal approximation's 2·1.96·sd/sqrt(n)
    assert a.high - a.low == pytest.approx(2 * 1.96 * values.std() / np.sqrt(200), rel=0.2)


def test_paired_bootstrap_of_a_constant_shift_is_that_shift():
    base = np.random.default_rng(5).random(50)
    ci = paired_bootstrap(base, base + 0.1, seed=0)
    assert ci.estimate == pytest.approx(0.1) and ci.low == pytest.approx(0.1) and ci.high == pytest.approx(0.1)
    noisy = paired_bootstrap(base, base[::-1], seed=0)
    assert noisy.low < 0 < noisy.high


def test_paired_bootstrap_uses_queries_defined_in_both_and_checks_shapes():
    ci = paired_bootstrap([0.1, np.nan, 0.3], [0.2, 0.5, np.nan], seed=0)
    assert ci.n == 1 and ci.estimate == pytest.approx(0.1)
    with pytest.raises(ValueError, match="same queries"):
        paired_bootstrap([0.1], [0.1, 0.2])
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci([0.1], confidence=1.5)

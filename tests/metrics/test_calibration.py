"""ECE, Brier score and reliability bins (metrics/calibration.py) against hand computations and
scikit-learn's ``calibration_curve`` (the peer for the bins' rates and means)."""

from __future__ import annotations

import numpy as np
import pytest

from steadyrank.metrics.calibration import brier_score, expected_calibration_error, reliability_bins

P = np.array([0.05, 0.15, 0.12, 0.55, 0.95, 1.0])
Y = np.array([0, 0, 1, 1, 1, 0])


def test_ece_by_hand() -> None:
    """Bins of width 0.1: {0.05 → 0}, {0.15 → 0, 0.12 → 1}, {0.55 → 1}, {0.95 → 1, 1.0 → 0} (1.0 in the last bin).
    ECE = (1·|0 − 0.05| + 2·|0.5 − 0.135| + 1·|1 − 0.55| + 2·|0.5 − 0.975|) / 6 = 2.18 / 6."""
    assert expected_calibration_error(P, Y, 10) == pytest.approx(2.18 / 6, abs=1e-12)
    bins = reliability_bins(P, Y, 10)
    assert [b.count for b in bins] == [1, 2, 0, 0, 0, 1, 0, 0, 0, 2]
    assert bins[1].mean_predicted == pytest.approx(0.135) and bins[1].observed_rate == 0.5
    assert bins[2].mean_predicted is None and bins[2].observed_rate is None
    # two bins, [0, 0.5) and [0.5, 1]: three pairs each, rates 1/3 and 2/3
    two = (3 * abs(1 / 3 - (0.05 + 0.15 + 0.12) / 3) + 3 * abs(2 / 3 - (0.55 + 0.95 + 1.0) / 3)) / 6
    assert expected_calibration_error(P, Y, 2) == pytest.approx(two, abs=1e-12)


def test_brier_by_hand() -> None:
    expected = (0.05**2 + 0.15**2 + 0.88**2 + 0.45**2 + 0.05**2 + 1.0**2) / 6
    assert brier_score(P, Y) == pytest.approx(expected, abs=1e-12)


def test_bins_agree_with_scikit_learn() -> None:
    from sklearn.calibration import calibration_curve

    rng = np.random.default_rng(7)
    p = rng.random(2000)
    y = (rng.random(2000) < p**1.5).astype(int)
    true, predicted = calibration_curve(y, p, n_bins=10, strategy="uniform")
    bins = [b for b in reliability_bins(p, y, 10) if b.count]
    np.testing.assert_allclose([b.observed_rate for b in bins], true, atol=1e-12)
    np.testing.assert_allclose([b.mean_predicted for b in bins], predicted, atol=1e-12)
    counts = np.array([b.count for b in bins])
    by_loop = sum(c / 2000 * abs(t - m) for c, t, m in zip(counts, true, predicted, strict=True))
    assert expected_calibration_error(p, y, 10) == pytest.approx(by_loop, abs=1e-12)


@pytest.mark.parametrize("p, y, message", [
    ([0.5], [2], "outcomes must be 0 or 1"),
    ([1.5], [1], r"probabilities must lie in \[0, 1\]"),
    ([], [], "no \\(probability, outcome\\) pair"),
    ([0.1, 0.2], [1], "1-D of one length"),
])
def test_bad_inputs_are_refused(p, y, message) -> None:
    with pytest.raises(ValueError, match=message):
        expected_calibration_error(np.array(p), np.array(y))

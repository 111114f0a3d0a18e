"""Calibrated scores (issue 37 item 5), the pure parts: the Platt fit against a closed form and an
independent optimiser, the map's strict increase (no ties created, also between keys that are equal
in BF16 but not in FP32), the split by query, the refusals (too few judgments, one class only, a map
that is not increasing) and the start-time refusal of a calibration fitted on another model."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from steadyrank.serve.runtime.inspection import BUNDLED_MODEL_ID
from steadyrank.serve.runtime.score_calibration import (
    CalibrationMismatchError,
    ScoreCalibration,
    check_model,
    load_calibration,
    platt_probability,
)
from steadyrank.serve.settings import SettingsError, check_files, load_settings
from steadyrank.serve.tools.score_calibration.fit import fit_platt
from steadyrank.serve.tools.score_calibration.pairs import JudgedPairs, split_by_query
from steadyrank.serve.tools.score_calibration.run import plan


def test_platt_fit_equals_the_closed_form_on_two_key_values() -> None:
    """With two key values x0 < x1 the maximum-likelihood logistic map passes through both observed
    rates: σ(a·x0 + b) = k0/n0 and σ(a·x1 + b) = k1/n1, so a = (logit r1 − logit r0) / (x1 − x0)."""
    x0, x1, n, k0, k1 = -1.0, 2.0, 40, 10, 30
    keys = np.array([x0] * n + [x1] * n, np.float32)
    relevant = np.array([1] * k0 + [0] * (n - k0) + [1] * k1 + [0] * (n - k1))
    fit = fit_platt(keys, relevant)

    def logit(r: float) -> float:
        return math.log(r / (1 - r))

    slope = (logit(k1 / n) - logit(k0 / n)) / (x1 - x0)
    assert fit.slope == pytest.approx(slope, abs=1e-6)  # 2·ln 3 / 3
    assert fit.intercept == pytest.approx(logit(k0 / n) - slope * x0, abs=1e-6)  # −ln 3 / 3
    assert (fit.n, fit.positives) == (2 * n, k0 + k1)


def test_platt_fit_equals_an_independent_optimiser() -> None:
    """scipy's BFGS on the negative log-likelihood, written out here, finds the same map."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(3)
    keys = rng.normal(0, 3, 400).astype(np.float32)
    relevant = (rng.random(400) < 1 / (1 + np.exp(-(0.8 * keys - 1.0)))).astype(int)

    def nll(theta: np.ndarray) -> float:
        z = theta[0] * keys.astype(np.float64) + theta[1]
        return float(np.sum(np.logaddexp(0, z) - relevant * z))

    best = minimize(nll, np.zeros(2), method="BFGS", options={"gtol": 1e-10}).x
    fit = fit_platt(keys, relevant)
    assert (fit.slope, fit.intercept) == pytest.approx((best[0], best[1]), abs=1e-4)
    assert nll(np.array([fit.slope, fit.intercept])) <= nll(best) + 1e-7


def test_a_map_that_is_not_increasing_is_refused() -> None:
    rng = np.random.default_rng(4)
    keys = rng.normal(0, 2, 200).astype(np.float32)
    relevant = (keys < 0).astype(int)  # the keys rank irrelevant documents first
    with pytest.raises(ValueError, match="not increasing"):
        fit_platt(keys, relevant)


@pytest.mark.parametrize("start", [-8.0, -0.5, 0.296875, 2.015625, 9.0])
def test_the_map_creates_no_ties(start: float) -> None:
    """Every float32 key of a BF16 value's rounding interval (consecutive FP32 keys, all equal in
    BF16: what boundary re-scoring separates) gets a distinct, increasing calibrated score, at key
    magnitudes up to a·key + b ≈ 11 (p = 1 − 1.7·10⁻⁵). In float32, σ would tie them: the test
    catches a map computed in the key's own precision. Random keys over a wide range keep their order."""
    import torch

    calibration = ScoreCalibration(slope=1.3, intercept=-0.7, model_id="m", precision="bf16", scoring="hps",
                                   threshold=3, golden={"id": "g"})
    keys = [np.float32(start)]  # a BF16 value
    for _ in range(300):
        keys.append(np.nextafter(keys[-1], np.float32(np.inf)))
    keys = np.array(keys, np.float32)
    in_bf16 = torch.from_numpy(keys).to(torch.bfloat16).float().numpy()
    assert np.all(in_bf16 == in_bf16[0]) and np.unique(keys).size == keys.size  # equal in BF16, not in FP32
    assert np.all(np.diff(calibration.apply(keys)) > 0)
    in_float32 = 1 / (1 + np.exp(-(np.float32(1.3) * keys - np.float32(0.7))))
    assert np.unique(in_float32).size < keys.size  # what a float32 map would have done
    wide = np.unique(np.random.default_rng(5).uniform(-300, (15 + 0.7) / 1.3, 100_000).astype(np.float32))
    assert np.all(np.diff(calibration.apply(wide)) > 0)


def test_the_map_is_sigma_of_the_affine_key_without_overflow() -> None:
    keys = np.array([-1e4, -50.0, -1.0, 0.0, 0.5, 20.0, 1e4], np.float32)
    expected = [1 / (1 + math.exp(-(0.9 * float(k) + 0.2))) if 0.9 * float(k) + 0.2 > -700 else 0.0 for k in keys]
    np.testing.assert_allclose(platt_probability(keys, 0.9, 0.2), expected, rtol=1e-14, atol=0)


def _pairs(queries: int, per_query: int, grade: int | None = None) -> JudgedPairs:
    grades = [grade if grade is not None else 1 + (q + d) % 5 for q in range(queries) for d in range(per_query)]
    return JudgedPairs(query_ids=[f"q{q}" for q in range(queries) for _ in range(per_query)],
                       queries=[f"query {q}" for q in range(queries) for _ in range(per_query)],
                       doc_ids=[f"d{q}-{d}" for q in range(queries) for d in range(per_query)],
                       texts=["text"] * (queries * per_query), grades=np.array(grades))


def test_split_by_query_is_seeded_and_keeps_each_query_in_one_half() -> None:
    pairs = _pairs(10, 4)
    fit, held = split_by_query(pairs.query_ids, 0.5, seed=1)
    assert np.array_equal(fit, split_by_query(pairs.query_ids, 0.5, seed=1)[0])
    assert not np.array_equal(fit, split_by_query(pairs.query_ids, 0.5, seed=2)[0])
    assert np.all(fit != held) and fit.sum() == held.sum() == 20
    fit_queries = {q for q, f in zip(pairs.query_ids, fit, strict=True) if f}
    held_queries = {q for q, h in zip(pairs.query_ids, held, strict=True) if h}
    assert not fit_queries & held_queries and len(fit_queries) == 5


@pytest.mark.parametrize("pairs, message", [
    (_pairs(10, 4, grade=5), "one class only: every one of the 40 judged pairs of the golden set is relevant"),
    (_pairs(10, 4, grade=1), "one class only: .* is not relevant"),
    (_pairs(6, 4), "too few judgments: the fit half holds 12 judged pairs"),
    (_pairs(1, 40), "a fit half and a held-out half need ≥ 2"),
])
def test_too_few_judgments_or_one_class_are_refused_before_any_model_work(pairs, message) -> None:
    with pytest.raises(ValueError, match=message):
        plan(pairs, threshold=3, fit_fraction=0.5, seed=0)


def _calibration_file(tmp_path: Path, model_id: str) -> Path:
    path = tmp_path / f"{model_id.replace('/', '_')}.json"
    calibration = ScoreCalibration(slope=2.0, intercept=-1.0, model_id=model_id, precision="fp32", scoring="hps",
                                   threshold=3, golden={"id": "demo"})
    path.write_text(json.dumps(calibration.to_json()))
    return path


def test_a_calibration_of_another_model_is_refused_at_start_or_flagged(tmp_path) -> None:
    """``check_files`` (what ``steadyrank serve`` and ``build_app`` run before anything starts)
    refuses a calibration fitted on another model id; ``score_calibration_mismatch: flag`` lets it start."""
    other = _calibration_file(tmp_path, "another/model")
    with pytest.raises(SettingsError, match=r"reranker.score_calibration: .*fitted on model 'another/model', "
                                            rf"but the model served is '{BUNDLED_MODEL_ID}'"):
        check_files(load_settings({"reranker": {"score_calibration": str(other)}}))
    check_files(load_settings({"reranker": {"score_calibration": str(other), "score_calibration_mismatch": "flag"}}))
    check_files(load_settings({"reranker": {"score_calibration": str(_calibration_file(tmp_path, BUNDLED_MODEL_ID))}}))
    with pytest.raises(SettingsError, match="no calibration file"):
        check_files(load_settings({"reranker": {"score_calibration": str(tmp_path / "none.json")}}))
    calibration = load_calibration(other)
    assert check_model(calibration, "another/model", allow_mismatch=False) is False
    assert check_model(calibration, BUNDLED_MODEL_ID, allow_mismatch=True) is True
    with pytest.raises(CalibrationMismatchError):
        check_model(calibration, BUNDLED_MODEL_ID, allow_mismatch=False)


def test_a_calibration_file_is_validated(tmp_path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="not a steadyrank score calibration"):
        load_calibration(path)
    data = ScoreCalibration(slope=1.0, intercept=0.0, model_id="m", precision="fp32", scoring="hps", threshold=3,
                            golden={}).to_json()
    path.write_text(json.dumps({**data, "slope": -1.0}))
    with pytest.raises(ValueError, match="slope must be > 0"):
        load_calibration(path)
    path.write_text(json.dumps({**data, "extra": 1}))
    with pytest.raises(ValueError, match="extra"):
        load_calibration(path)

"""``precision: auto`` by measurement (:mod:`serve.runtime.precision_calibration`, :mod:`serve.runtime.calibrated`).

The choice rule is checked with stand-in precisions on a stand-in clock (a candidate that is slower
than FP32, or whose ranking breaks parity, is never picked; brute force over random measurements),
the agreement against scipy's Spearman ρ, and the whole calibration on a real tiny cross-encoder
(every candidate this CPU has, really loaded and run) with its cache.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from steadyrank.serve.runtime import ModelSettings
from steadyrank.serve.runtime import precision_calibration as calibration
from steadyrank.serve.runtime.factory import load_scorer
from steadyrank.serve.runtime.precision import cpu_bf16_unit, cpu_flags, cpu_int8_unit
from steadyrank.serve.runtime.precision_calibration import (
    CalibrationCache,
    Measurement,
    calibration_set,
    candidates,
    mean_spearman,
    measure,
    pick,
)


class StandInClock:
    """A clock that stand-in passes advance by their cost (seconds), so timings are exact."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


KEYS = [np.array([3.0, 2.0, 1.0, 0.5, 0.1]), np.array([1.0, 4.0, 2.0, 3.0, 0.0])]


def _stand_in(clock: StandInClock, cost: dict[str, float], broken: set[str]):
    """``load_pass`` of stand-in precisions: each pass costs ``cost[p]`` seconds on ``clock``; the
    keys of a ``broken`` precision are negated (ranked in reverse: ρ = −1)."""

    def load_pass(precision: str):
        def ranked() -> list[np.ndarray]:
            clock.now += cost[precision]
            return [-k if precision in broken else k.copy() for k in KEYS]

        return ranked

    return load_pass


@pytest.mark.parametrize(("cost", "broken", "expected"), [
    ({"fp32": 1.0, "bf16": 0.5, "int8": 0.3}, set(), "int8"),
    ({"fp32": 1.0, "bf16": 1.5, "int8": 2.0}, set(), "fp32"),  # slower than FP32: never picked
    ({"fp32": 1.0, "bf16": 0.5, "int8": 0.3}, {"int8"}, "bf16"),  # fastest but breaks parity: never picked
    ({"fp32": 1.0, "bf16": 0.5, "int8": 0.3}, {"int8", "bf16"}, "fp32"),
])
def test_the_fastest_precision_that_keeps_parity_is_picked(cost, broken, expected) -> None:
    clock = StandInClock()
    measurements = measure(list(cost), _stand_in(clock, cost, broken), repeats=3, clock=clock)
    assert {m.precision: m.seconds for m in measurements} == pytest.approx(cost)
    choice = pick(measurements)
    assert choice.precision == expected and choice.requested == "auto"
    for p in broken:
        assert f"{p} {cost[p] * 1000:.0f} ms, ρ -1.0000 < {calibration.PARITY_MIN_SPEARMAN} (breaks parity)" in choice.reason


def test_pick_is_the_brute_force_minimum_over_qualifying_candidates() -> None:
    rng = np.random.default_rng(0)
    for _ in range(500):
        measurements = [Measurement("fp32", float(rng.uniform(0.1, 2)), 1.0)] + [
            Measurement(p, float(rng.uniform(0.1, 2)), float(rng.uniform(0.9, 1.0))) for p in ("bf16", "int8")]
        choice = pick(measurements)
        qualifying = [m for m in measurements if m.spearman >= calibration.PARITY_MIN_SPEARMAN]
        fastest = min(qualifying, key=lambda m: m.seconds)
        assert choice.precision == fastest.precision
        assert fastest.seconds <= measurements[0].seconds  # never slower than FP32


def test_a_spent_budget_leaves_the_other_candidates_unmeasured() -> None:
    clock = StandInClock()
    cost = {"fp32": 5.0, "bf16": 0.1, "int8": 0.1}
    measurements = measure(["bf16", "fp32", "int8"], _stand_in(clock, cost, set()), repeats=1, budget_s=1.0,
                           clock=clock)
    assert [m.precision for m in measurements] == ["fp32"]  # FP32 first, always; then the budget was spent
    choice = pick(measurements, unmeasured=["bf16", "int8"])
    assert choice.precision == "fp32" and "bf16 not measured (calibration budget spent)" in choice.reason


def test_a_calibration_without_fp32_is_refused() -> None:
    with pytest.raises(ValueError, match="FP32"):
        measure(["bf16"], _stand_in(StandInClock(), {"bf16": 1.0}, set()))
    with pytest.raises(ValueError, match="FP32"):
        pick([Measurement("bf16", 1.0, 1.0)])


def test_mean_spearman_is_scipys_with_ties() -> None:
    rng = np.random.default_rng(1)
    for _ in range(50):
        a = [np.round(rng.normal(size=12), 1) for _ in range(5)]  # rounded: ties
        b = [x + np.round(rng.normal(scale=0.3, size=12), 1) for x in a]
        expected = np.mean([spearmanr(x, y)[0] for x, y in zip(a, b, strict=True)])
        assert mean_spearman(a, b) == pytest.approx(expected, abs=1e-12)
    flat, varied = np.zeros(4), np.arange(4.0)
    assert mean_spearman([flat], [flat]) == 1.0 and mean_spearman([flat], [varied]) == 0.0


def test_candidates_are_what_the_device_computes_natively() -> None:
    assert candidates("cpu", frozenset()) == ("fp32",)
    assert candidates("cpu", frozenset({"avx512_bf16", "avx512_vnni"})) == ("fp32", "bf16", "int8")
    assert candidates("cpu", frozenset({"avx512_vnni"}), backend="vllm") == ("fp32",)
    assert candidates("cuda", frozenset(), cuda_bf16=True) == ("fp32", "bf16", "fp16")
    assert candidates("cuda", frozenset()) == ("fp32", "fp16")


def test_the_calibration_set_is_the_demo_sets_judged_passages_and_distractors() -> None:
    queries = calibration_set()
    assert len(queries) == calibration.CALIBRATION_QUERIES
    golden = [json.loads(line) for line in
              (Path(calibration.__file__).parents[1] / "data" / "demo" / "golden.jsonl").read_text().splitlines()]
    for query, entry in zip(queries, golden, strict=False):
        assert query.query == entry["query"]
        assert len(query.passages) == len(entry["judgments"]) + calibration.CALIBRATION_DISTRACTORS
        assert len(set(query.passages)) == len(query.passages)
    assert calibration_set() == queries  # deterministic


def test_the_cache_round_trips_and_survives_a_corrupt_file(tmp_path: Path) -> None:
    cache = CalibrationCache(tmp_path / "c" / "precision-auto.json")
    assert cache.get("k") is None
    measurements = [Measurement("fp32", 1.0, 1.0), Measurement("bf16", 0.5, 0.999)]
    choice = pick(measurements)
    cache.put("k", "model", choice, measurements)
    cached = cache.get("k")
    assert cached is not None and cached.precision == "bf16" and cached.reason == f"{choice.reason} (cached)"
    cache.path.write_text("{not json")
    assert cache.get("k") is None
    cache.put("k", "model", choice, measurements)  # rewritten whole
    assert cache.get("k") is not None


def test_a_real_cross_encoder_is_calibrated_once_and_then_cached(cross_encoder_1: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The tiny model is below the size worth measuring; the threshold is lowered so the real path
    runs: every candidate this CPU has is loaded and ranks the calibration set."""
    file = tmp_path / "precision-auto.json"
    flags = cpu_flags()
    expected = ["fp32"] + (["bf16"] if cpu_bf16_unit(flags) else []) + (["int8"] if cpu_int8_unit(flags) else [])
    settings = ModelSettings(path=str(cross_encoder_1), device="cpu")
    unmeasured = load_scorer(settings, calibration=file)  # too small to measure: the flags decide, no file
    assert "measured" not in unmeasured.precision_choice.reason and not file.exists()

    monkeypatch.setattr(calibration, "MEASURE_MIN_WEIGHT_BYTES", 0)
    first = load_scorer(settings, calibration=file)
    (entry,) = json.loads(file.read_text()).values()
    measured = {m["precision"]: m for m in entry["measurements"]}
    assert sorted(measured) == sorted(expected)
    assert first.precision == entry["precision"] == first.precision_choice.precision
    assert measured[first.precision]["spearman"] >= calibration.PARITY_MIN_SPEARMAN
    assert measured[first.precision]["seconds"] == min(
        m["seconds"] for m in measured.values() if m["spearman"] >= calibration.PARITY_MIN_SPEARMAN)
    assert first.precision_choice.reason.startswith("measured: fp32 ")

    second = load_scorer(settings, calibration=file)
    assert second.precision == first.precision and second.precision_choice.reason.endswith("(cached)")
    explicit = load_scorer(settings.model_copy(update={"precision": "fp32"}), calibration=file)
    assert explicit.precision_choice.reason == "set in the settings"  # only auto is measured

"""Load a pair scorer whose ``precision: auto`` is measured (:mod:`serve.runtime.precision_calibration`)."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np

from steadyrank.serve.runtime.inspection import ModelSpec, model_id
from steadyrank.serve.runtime.precision import ForwardPrecision
from steadyrank.serve.runtime.precision_calibration import (
    CalibrationCache,
    RankPass,
    calibration_for,
    calibration_set,
    measure,
    pick,
)
from steadyrank.serve.runtime.scorer import PairScorer
from steadyrank.serve.runtime.settings import ModelSettings


def load_calibrated(spec: ModelSpec, settings: ModelSettings, cache_file: Path) -> PairScorer:
    """The scorer of ``spec`` in the precision ``auto`` picks by measurement: the cached choice for
    this model, device, CPU and torch, or a fresh calibration (each candidate loaded in turn, then
    the winner loaded again and the choice cached). A model too small to measure, or a device with
    one candidate, loads as the flags decide. The scorer's ``precision_choice`` names the measurement."""
    identity = model_id(spec)
    calibration = calibration_for(spec.path, identity, settings)
    if calibration is None:
        return PairScorer(spec, settings, identity)
    cache = CalibrationCache(cache_file)
    choice = cache.get(calibration.key)
    if choice is None:
        queries = calibration_set()

        def load_pass(precision: ForwardPrecision) -> RankPass:
            scorer = PairScorer(spec, settings.model_copy(update={"precision": precision}), identity)

            def ranked() -> list[np.ndarray]:
                return [scorer.score([(q.query, p) for p in q.passages]).keys for q in queries]

            return ranked

        measurements = measure(calibration.options, load_pass)
        gc.collect()  # the candidates' weights, before the winner loads
        measured = {m.precision for m in measurements}
        choice = pick(measurements, unmeasured=[p for p in calibration.options if p not in measured])
        cache.put(calibration.key, identity, choice, measurements)
    scorer = PairScorer(spec, settings.model_copy(update={"precision": choice.precision}), identity)
    scorer.precision_choice = choice
    return scorer

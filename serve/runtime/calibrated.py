"""Load a pair scorer whose ``precision: auto`` is measured (:mod:`serve.runtime.precision_calibration`),
and give a scorer its certified cutoff (the forward's measured score error bound)."""

from __future__ import annotations

import gc
from importlib.metadata import version
from pathlib import Path

import numpy as np

from steadyrank.retrieval.ranking import Cutoff
from steadyrank.serve.runtime.inspection import ModelSpec, model_id
from steadyrank.serve.runtime.precision import ForwardPrecision, PrecisionChoice, device_facts
from steadyrank.serve.runtime.precision_calibration import (
    CalibrationCache,
    ErrorBound,
    Measurement,
    RankPass,
    calibration_for,
    calibration_key,
    calibration_set,
    error_bound,
    measure,
    pick,
)
from steadyrank.serve.runtime.scorer import PairScorer, Scorer
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
    certify(scorer, cache_file, calibration.key)
    return scorer


def certify(scorer: Scorer, cache_file: Path | None, key: str | None = None) -> None:
    """Set ``scorer.cutoff`` (:class:`~retrieval.ranking.Cutoff`) where its settings ask for certified
    cutoffs and it re-scores boundary ties (HPS below FP32): the margin is ``score_error_bound`` when
    set, else the :class:`ErrorBound` cached in ``cache_file`` under ``key`` (a measured ``auto``'s
    entry) or under the scorer's own key, else one measured now on the calibration set (the scorer's
    keys against its FP32 twin's, which boundary re-scoring loads anyway) and cached there (when given)."""
    s = scorer.settings
    if not (s.certify_cutoffs and scorer.rescores_boundary_ties):
        return
    if s.score_error_bound is not None:
        scorer.cutoff = Cutoff(s.score_error_bound, s.certify_max_rescore)
        return
    cache = None if cache_file is None else CalibrationCache(cache_file)
    own = _bound_key(scorer)
    found = None
    if cache is not None:
        found = (cache.error_bound(key, scorer.precision) if key is not None else None) \
            or cache.error_bound(own, scorer.precision)
    if found is None:
        found = measure_error(scorer)
        if cache is not None:
            ran = scorer.precision_choice.precision
            choice = PrecisionChoice(s.precision, ran, "certified cutoffs: score error bound")
            cache.put(own, scorer.model_id, choice, [Measurement(ran, 0.0, 1.0, found)])
    scorer.error_bound = found
    scorer.cutoff = Cutoff(found.bound, s.certify_max_rescore)


def measure_error(scorer: Scorer) -> ErrorBound:
    """The :class:`ErrorBound` of ``scorer``'s keys against its FP32 twin's on the calibration set."""
    pairs = [[(q.query, p) for p in q.passages] for q in calibration_set()]
    return error_bound([scorer.score(p).keys for p in pairs], [scorer.fp32_keys(p) for p in pairs])


def _bound_key(scorer: Scorer) -> str:
    """What a measured error bound is valid for: the model, the device, the CPU, torch, the precision
    and the forward's shape settings (:func:`calibration_key`)."""
    s = scorer.settings
    facts = device_facts(s.device)
    shape = f"certify|{s.precision}|{s.backend}|{s.max_length}|{s.batch_size}|{s.scoring}"
    return calibration_key(scorer.spec.path, model_id=scorer.model_id, device=facts.device_type, flags=facts.flags,
                           torch_version=version("torch"), shape=shape)

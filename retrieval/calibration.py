"""Calibrating the dynamic-K thresholds on a golden set (queries with graded judgments).

Each golden query is retrieved and reranked to ``k_high`` once (route ``fixed100``). Because the
reranker runs in two pointwise passes, that one ranking also gives the ``k_low`` ranking and the
routing signals, so every threshold setting can be replayed offline (:func:`replay_route`).

Per query q: ``gain_q = M(k_high) − M(k_low)`` for the measure M (default RA-nWG@30, expected value
under ties; NA counts as 0) and ``extra_q = min(k_high, n_q) − min(k_low, n_q)`` candidates.
A setting escalates a set E of queries (any enabled signal fires); it recovers ``Σ_E gain_q`` of the
total ``G = Σ_q gain_q`` for ``Σ_E extra_q`` extra reranked candidates. Thresholds are searched on a
grid (midpoints between observed signal values, at most ``grid`` per signal, plus "disabled"):

- ``objective="rate"``: escalation rate ``|E| / Q ≤ target_rate``, maximise ``Σ_E gain``.
- ``objective="efficiency"``: ``Σ_E gain ≥ min_recovery · G``, maximise gain per extra candidate
  ``Σ_E gain / Σ_E extra`` (when ``G ≤ 0`` escalation never pays and every signal is disabled).

Ties in the objective go to fewer escalations, then to fewer enabled signals.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, cast

import numpy as np
import numpy.typing as npt

from steadyrank.metrics import evaluate
from steadyrank.retrieval.pipeline import Ranked, serve_order
from steadyrank.retrieval.routing import (
    MODEL_FEATURES,
    Route,
    RoutingDecision,
    RoutingSettings,
    RoutingSignals,
    decide,
    model_probability,
)

Objective = Literal["rate", "efficiency"]
OBJECTIVES: tuple[Objective, ...] = ("rate", "efficiency")
DEFAULT_MEASURE = "ra_nwg@30"


@dataclass(frozen=True)
class Observation:
    """One golden query: its signals, what escalating it gains, what it costs (candidates)."""

    qid: str
    signals: RoutingSignals
    gain: float
    extra: int


@dataclass(frozen=True)
class Calibration:
    """The chosen settings and their in-sample effect (means are per query)."""

    settings: RoutingSettings
    objective: Objective
    measure: str
    n_queries: int
    escalation_rate: float
    mean_gain: float
    mean_gain_all: float
    recovered: float | None
    mean_reranked: float
    mean_reranked_high: float
    gain_per_extra_candidate: float | None

    def to_json(self) -> dict[str, Any]:
        """Provenance block of the settings file."""
        return {
            "objective": self.objective,
            "measure": self.measure,
            "n_queries": self.n_queries,
            "escalation_rate": self.escalation_rate,
            "mean_gain": self.mean_gain,
            "mean_gain_escalate_all": self.mean_gain_all,
            "recovered_fraction": self.recovered,
            "mean_candidates_reranked": self.mean_reranked,
            "mean_candidates_reranked_fixed_high": self.mean_reranked_high,
            "gain_per_extra_candidate": self.gain_per_extra_candidate,
        }


def replay_route(
    ranked: Ranked, settings: RoutingSettings, route: Route
) -> tuple[list[str], np.ndarray, RoutingDecision]:
    """The served list ``route`` would have produced, from a ranking reranked to ``k_high``.

    Valid because signals use only the first ``k_low`` reranker scores and the reranker is pointwise.
    """
    if ranked.signals is None:
        raise ValueError("replaying needs a reranked ranking (it has no routing signals)")
    decision = decide(ranked.signals, settings, route)
    if decision.k_rerank > len(ranked.rerank_keys):
        raise ValueError("replaying needs a ranking reranked to k_high (route fixed100)")
    doc_ids, scores = serve_order(ranked.candidates.doc_ids, ranked.rerank_keys[: decision.k_rerank])
    return doc_ids, scores, decision


def per_query_measure(
    run: Mapping[str, tuple[list[str], np.ndarray]],
    qrels: Mapping[str, Mapping[str, float]],
    measure: str,
    *,
    rubric_map: Mapping[float, float] | None,
    rel_level: float,
) -> dict[str, float]:
    """Expected value of ``measure`` per query (NA → 0.0) for ``{qid: (doc_ids, scores)}``."""
    as_run = {qid: dict(zip(ids, map(float, scores), strict=True)) for qid, (ids, scores) in run.items()}
    result = evaluate(as_run, qrels, [measure], rubric_map=rubric_map, rel_level=rel_level)
    values = np.nan_to_num(result[measure].expected, nan=0.0)
    return dict(zip(result.query_ids, values.tolist(), strict=True))


def observe(
    rankings: Mapping[str, Ranked],
    qrels: Mapping[str, Mapping[str, float]],
    settings: RoutingSettings,
    *,
    measure: str = DEFAULT_MEASURE,
    rubric_map: Mapping[float, float] | None = None,
    rel_level: float = 1,
) -> list[Observation]:
    """Observations for the judged queries of ``rankings`` (each reranked to ``k_high``)."""
    judged = {qid: r for qid, r in rankings.items() if qid in qrels}
    low = {qid: replay_route(r, settings, "fixed50")[:2] for qid, r in judged.items()}
    high = {qid: replay_route(r, settings, "fixed100")[:2] for qid, r in judged.items()}
    m_low = per_query_measure(low, qrels, measure, rubric_map=rubric_map, rel_level=rel_level)
    m_high = per_query_measure(high, qrels, measure, rubric_map=rubric_map, rel_level=rel_level)
    observations: list[Observation] = []
    for qid, ranked in judged.items():
        signals = ranked.signals
        assert signals is not None  # replay_route refused a ranking without signals above
        n = signals.n_candidates
        extra = min(settings.k_high, n) - min(settings.k_low, n)
        observations.append(Observation(qid, signals, m_high[qid] - m_low[qid], extra))
    return observations


def _grid(values: Sequence[float | None], grid: int, fires_below: bool) -> list[float | None]:
    """``None`` (disabled) plus thresholds separating consecutive observed values."""
    observed = np.unique(np.array([v for v in values if v is not None], dtype=np.float64))
    if observed.size > grid:
        observed = np.unique(np.quantile(observed, np.linspace(0.0, 1.0, grid)))
    if observed.size == 0:
        return [None]
    step = float(np.diff(observed).min()) / 2 if observed.size > 1 else 1e-6
    cuts = (observed[:-1] + observed[1:]) / 2
    edge = observed[-1] + step if fires_below else observed[0] - step
    thresholds = np.append(cuts, edge) if fires_below else np.insert(cuts, 0, edge)
    return [None, *map(float, thresholds)]


def _masks(values: Sequence[float | None], thresholds: list[float | None], fires_below: bool) -> np.ndarray:
    """(len(thresholds), Q) bool: does the signal fire for each query under each threshold."""
    v = np.array([np.nan if x is None else x for x in values], dtype=np.float64)
    rows: list[np.ndarray] = []
    for t in thresholds:
        if t is None:
            rows.append(np.zeros(v.size, dtype=bool))
        else:
            with np.errstate(invalid="ignore"):
                rows.append(np.nan_to_num(v < t if fires_below else v > t, nan=False).astype(bool))
    return np.reshape(np.array(rows, dtype=bool), (len(thresholds), v.size))


def calibrate(
    observations: Sequence[Observation],
    base: RoutingSettings,
    *,
    objective: Objective = "efficiency",
    target_rate: float = 0.35,
    min_recovery: float = 0.9,
    measure: str = DEFAULT_MEASURE,
    grid: int = 48,
) -> Calibration:
    """Thresholds for ``base``'s signals that best meet ``objective`` on ``observations``."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    if not observations:
        raise ValueError("no judged queries to calibrate on")
    signals = [o.signals for o in observations]
    gain = np.array([o.gain for o in observations], dtype=np.float64)
    extra = np.array([o.extra for o in observations], dtype=np.float64)
    can = extra > 0
    grids = [
        _grid([s.dense_margin for s in signals], grid, True),
        _grid([s.rerank_entropy for s in signals], grid, False),
        _grid([s.overlap for s in signals], grid, True),
    ]
    masks = [
        _masks([s.dense_margin for s in signals], grids[0], True),
        _masks([s.rerank_entropy for s in signals], grids[1], False),
        _masks([s.overlap for s in signals], grids[2], True),
    ]
    tie = np.array([np.zeros(len(signals), dtype=bool), [bool(s.tie_at_top_n) for s in signals]], dtype=bool)
    shape = (len(grids[0]), len(grids[1]), len(grids[2]), 2)
    esc_gain, esc_count, esc_extra = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    for i, row in enumerate(masks[0]):
        fired = (row[None, None, None, :] | masks[1][:, None, None, :] | masks[2][None, :, None, :]
                 | tie[None, None, :, :])
        fired &= can
        esc_gain[i], esc_count[i], esc_extra[i] = fired @ gain, fired.sum(-1), fired @ extra
    enabled = (np.indices(shape) > 0).sum(axis=0)  # signals switched on, per grid point
    total = float(gain[can].sum())
    score = _objective_score(esc_gain, esc_count, esc_extra, total, len(signals), objective, target_rate, min_recovery)
    best = int(np.lexsort((enabled.ravel(), esc_count.ravel(), -score.ravel()))[0])
    i, j, k, t = (int(x) for x in np.unravel_index(best, shape))
    settings = replace(
        base,
        margin_below=grids[0][i],
        entropy_above=grids[1][j],
        overlap_below=grids[2][k],
        tie_enabled=bool(t),
    )
    return _calibration(settings, objective, measure, observations, float(esc_gain[i, j, k, t]),
                        float(esc_count[i, j, k, t]), float(esc_extra[i, j, k, t]))


def _objective_score(esc_gain: np.ndarray, esc_count: np.ndarray, esc_extra: np.ndarray, total: float, q: int,
                     objective: Objective, target_rate: float, min_recovery: float) -> np.ndarray:
    """The objective of each candidate setting (−inf where its constraint fails); see the module docstring."""
    if objective == "rate":
        return np.where(esc_count <= target_rate * q + 1e-9, esc_gain, -np.inf)
    if total <= 0:
        return np.where(esc_count == 0, 0.0, -np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(esc_extra > 0, esc_gain / esc_extra, 0.0)
    return np.where(esc_gain >= min_recovery * total - 1e-12, ratio, -np.inf)


def _calibration(settings: RoutingSettings, objective: Objective, measure: str, observations: Sequence[Observation],
                 esc_gain: float, esc_count: float, esc_extra: float) -> Calibration:
    q = len(observations)
    gain = np.array([o.gain for o in observations], dtype=np.float64)
    extra = np.array([o.extra for o in observations], dtype=np.float64)
    total = float(gain[extra > 0].sum())
    low = np.array([min(settings.k_low, o.signals.n_candidates) for o in observations], dtype=np.float64)
    return Calibration(
        settings=settings,
        objective=objective,
        measure=measure,
        n_queries=q,
        escalation_rate=esc_count / q,
        mean_gain=esc_gain / q,
        mean_gain_all=total / q,
        recovered=esc_gain / total if total > 0 else None,
        mean_reranked=float(low.sum() + esc_extra) / q,
        mean_reranked_high=float(low.sum() + extra.sum()) / q,
        gain_per_extra_candidate=esc_gain / esc_extra if esc_extra > 0 else None,
    )


def signal_matrix(observations: Sequence[Observation], features: Sequence[str] = MODEL_FEATURES) -> np.ndarray:
    """(Q, F) float64 of the named signals; NaN where a signal is unavailable."""
    return np.reshape(
        np.array([[np.nan if getattr(o.signals, f) is None else float(getattr(o.signals, f)) for f in features]
                  for o in observations], dtype=np.float64),
        (len(observations), len(features)))


class _LogisticRegression(Protocol):
    """The part of scikit-learn's ``LogisticRegression`` used here (scikit-learn ships no type stubs)."""

    coef_: npt.NDArray[np.float64]  # (1, F) once fitted
    intercept_: npt.NDArray[np.float64]  # (1,) once fitted

    def fit(self, x: npt.NDArray[np.float64], y: npt.NDArray[np.bool_], *,
            sample_weight: npt.NDArray[np.float64]) -> _LogisticRegression: ...


class _LogisticRegressionClass(Protocol):
    def __call__(self, *, C: float) -> _LogisticRegression: ...  # scikit-learn's parameter name


def _logistic_regression() -> _LogisticRegressionClass:
    """``sklearn.linear_model.LogisticRegression``, typed by the protocols above."""
    # the untyped scikit-learn module is a dynamic boundary: its class is read through the protocols
    linear_model: Any = importlib.import_module("sklearn.linear_model")
    return cast(_LogisticRegressionClass, linear_model.LogisticRegression)


def fit_model(
    observations: Sequence[Observation],
    base: RoutingSettings,
    *,
    objective: Objective = "efficiency",
    target_rate: float = 0.35,
    min_recovery: float = 0.9,
    measure: str = DEFAULT_MEASURE,
    regularisation: float = 1.0,
    features: Sequence[str] = MODEL_FEATURES,
) -> Calibration:
    """A logistic routing model and its threshold, fitted on ``observations``.

    Features: those of ``features`` (default all :data:`MODEL_FEATURES`; one feature gives a single
    threshold on that signal, its direction fitted) observed for at least two distinct values, standardised
    (``(x − μ) / σ``, a missing value counts as μ). Target: ``gain_q > 0``, sample weight
    ``|gain_q| + mean_q |gain_q|`` (large gains and losses count more; a query where escalating
    changes nothing still counts as "do not escalate"), L2 penalty ``1 / regularisation``
    (scikit-learn ``LogisticRegression(C=regularisation)``). The threshold ``model_above`` is then
    chosen among the midpoints of the fitted probabilities by ``objective`` exactly as in
    :func:`calibrate`; the threshold rules of ``base`` are disabled. With no query that gains or no
    usable feature, the model never escalates (``model_above`` = None).
    """
    logistic_regression = _logistic_regression()

    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    if not observations:
        raise ValueError("no judged queries to calibrate on")
    rules_off = replace(base, margin_below=None, entropy_above=None, tie_enabled=False, overlap_below=None,
                        boundary_below=None, tail_mass_above=None, first_stage_gap_below=None, model_features=(),
                        model_mean=(), model_scale=(), model_coef=(), model_intercept=0.0, model_above=None)
    unknown = sorted(set(features) - set(MODEL_FEATURES))
    if unknown or not features:
        raise ValueError(f"model features must be a non-empty subset of {list(MODEL_FEATURES)}, got {list(features)}")
    features = tuple(features)
    x = signal_matrix(observations, features)
    gain = np.array([o.gain for o in observations], dtype=np.float64)
    extra = np.array([o.extra for o in observations], dtype=np.float64)
    usable = [j for j in range(x.shape[1]) if np.unique(x[~np.isnan(x[:, j]), j]).size >= 2]
    target = gain > 0
    weight = np.abs(gain) + np.abs(gain).mean()
    if not usable or target.all() or not target.any():
        return _calibration(rules_off, objective, measure, observations, 0.0, 0.0, 0.0)
    mean = np.array([float(np.nanmean(x[:, j])) for j in usable])
    scale = np.array([float(np.nanstd(x[:, j])) for j in usable])
    z = np.nan_to_num((x[:, usable] - mean) / scale, nan=0.0)
    fitted = logistic_regression(C=regularisation).fit(z, target, sample_weight=weight)
    model = replace(rules_off, model_features=tuple(features[j] for j in usable), model_mean=tuple(mean.tolist()),
                    model_scale=tuple(scale.tolist()), model_coef=tuple(fitted.coef_[0].tolist()),
                    model_intercept=float(fitted.intercept_[0]))
    p = np.array([model_probability(o.signals, model) for o in observations])
    levels = np.unique(p)
    thresholds = np.concatenate([[levels[0] - 1e-9], (levels[:-1] + levels[1:]) / 2, [np.inf]])
    fired = (p[None, :] > thresholds[:, None]) & (extra > 0)
    esc_gain, esc_count, esc_extra = fired @ gain, fired.sum(1).astype(float), fired @ extra
    total = float(gain[extra > 0].sum())
    score = _objective_score(esc_gain, esc_count, esc_extra, total, len(observations), objective, target_rate,
                             min_recovery)
    best = int(np.lexsort((esc_count, -score))[0])
    above = None if not np.isfinite(thresholds[best]) else float(thresholds[best])
    return _calibration(replace(model, model_above=above), objective, measure, observations,
                        float(esc_gain[best]), float(esc_count[best]), float(esc_extra[best]))


def recovery_curve(observations: Sequence[Observation], priority: Sequence[float], k_low: int) -> list[dict[str, float]]:
    """Gain recovered vs candidates reranked when the ``j`` queries of highest ``priority`` escalate,
    for ``j = 0 … Q`` (ties in priority escalate together, in one step).

    Each point: ``escalated`` (fraction of queries), ``mean_reranked`` (candidates per query),
    ``candidate_share`` (÷ the escalate-all mean) and ``recovered`` (÷ the escalate-all gain; NaN
    when that gain is ≤ 0). ``priority = gain`` gives the oracle curve (the best possible order).
    """
    gain = np.array([o.gain for o in observations], dtype=np.float64)
    extra = np.array([o.extra for o in observations], dtype=np.float64)
    low = float(sum(min(k_low, o.signals.n_candidates) for o in observations))
    q = len(observations)
    total, high = float(gain[extra > 0].sum()), (low + extra.sum()) / q
    values = np.asarray(priority, dtype=np.float64)
    points: list[dict[str, float]] = []
    esc_gain, esc_extra, count = 0.0, 0.0, 0
    levels = [None, *sorted(set(values.tolist()), reverse=True)]
    for level in levels:
        if level is not None:
            chosen = (values == level) & (extra > 0)
            esc_gain += float(gain[chosen].sum())
            esc_extra += float(extra[chosen].sum())
            count += int((values == level).sum())
        mean = (low + esc_extra) / q
        points.append({"escalated": count / q, "mean_reranked": mean, "candidate_share": mean / high,
                       "recovered": esc_gain / total if total > 0 else float("nan")})
    return points


def best_recovery_within(curve: Sequence[dict[str, float]], max_share: float) -> float:
    """The highest ``recovered`` of a curve among points with ``candidate_share ≤ max_share``."""
    return max((p["recovered"] for p in curve if p["candidate_share"] <= max_share + 1e-12), default=float("nan"))

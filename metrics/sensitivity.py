"""RA-nWG's sensitivity to its rarity exponent α and its caps: the metric over a grid of both.

RA-nWG weighs a grade by its rarity in the judged pool, ``r_g = b_g / p_g^α``, capped relative to
grade 5 at ``cap4`` and ``cap3`` (docs/ARCHITECTURE.md "RA-nWG, N-Recall, Harm"). The paper uses
α = 1 and caps 1.0 / 0.25 and asks results to state them; this module evaluates every RA-nWG
measure (and its novelty-discounted variant) for each run at each (α, cap4, cap3) of a grid and
reports each point's macro mean of the tie-aware expected value, its change from the baseline
point, the largest change of one query, and whether the order of the runs stays the baseline's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from steadyrank.metrics.evaluate import Evaluation, Qrels, Run, evaluate
from steadyrank.metrics.params import MetricParams

#: The default grid: α around the paper's 1, and caps around its (1.0, 0.25).
DEFAULT_ALPHAS = (0.5, 1.0, 1.5, 2.0)
DEFAULT_CAPS = ((1.0, 0.25), (0.5, 0.125), (1.0, 0.5), (2.0, 0.5))
SENSITIVE_METRICS = ("ra_nwg", "ra_nwg_novelty")


@dataclass(frozen=True)
class SensitivityPoint:
    """One grid point: per run and measure the macro mean of E, its change from the baseline and the
    largest per-query change; ``same_order[measure]``: the runs rank as at the baseline."""

    alpha: float
    cap4: float
    cap3: float
    mean: Mapping[str, Mapping[str, float]]  # run → measure → mean E
    delta: Mapping[str, Mapping[str, float]]  # run → measure → mean E − baseline mean E
    max_query_delta: Mapping[str, Mapping[str, float]]  # run → measure → max |E_q − baseline E_q|
    same_order: Mapping[str, bool]

    def as_dict(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "cap4": self.cap4, "cap3": self.cap3,
                "mean": {r: dict(v) for r, v in self.mean.items()}, "delta": {r: dict(v) for r, v in self.delta.items()},
                "max_query_delta": {r: dict(v) for r, v in self.max_query_delta.items()},
                "same_order": dict(self.same_order)}


def _order(means: Mapping[str, Mapping[str, float]], measure: str) -> list[str]:
    return sorted(means, key=lambda run: -means[run][measure])


def ra_nwg_sensitivity(
    runs: Mapping[str, Run], qrels: Qrels, measures: Sequence[str], *,
    alphas: Sequence[float] = DEFAULT_ALPHAS, caps: Sequence[tuple[float, float]] = DEFAULT_CAPS,
    baseline: MetricParams | None = None, **evaluate_kwargs: Any,
) -> tuple[MetricParams, list[SensitivityPoint]]:
    """``(baseline, points)``: every RA-nWG measure of ``measures`` for every run over the grid
    ``alphas × caps`` (other parameters as in ``baseline``); ``evaluate_kwargs`` go to :func:`evaluate`."""
    from steadyrank.metrics.measures import parse_measures

    chosen = [str(m) for m in parse_measures(list(measures)) if m.name in SENSITIVE_METRICS]
    if not chosen:
        raise ValueError(f"the sensitivity report needs an RA-nWG measure ({', '.join(SENSITIVE_METRICS)}), "
                         f"e.g. ra_nwg@10")
    baseline = MetricParams() if baseline is None else baseline

    def run_all(params: MetricParams) -> dict[str, Evaluation]:
        return {name: evaluate(run, qrels, chosen, params=params, **evaluate_kwargs) for name, run in runs.items()}

    def means(results: Mapping[str, Evaluation]) -> dict[str, dict[str, float]]:
        return {name: {m: float(r.summary[m]["expected"]) for m in chosen} for name, r in results.items()}

    base = run_all(baseline)
    base_means = means(base)
    points: list[SensitivityPoint] = []
    for alpha in alphas:
        for cap4, cap3 in caps:
            params = replace(baseline, rarity_alpha=float(alpha), rarity_cap4=float(cap4), rarity_cap3=float(cap3))
            results = run_all(params)
            point_means = means(results)
            delta = {r: {m: point_means[r][m] - base_means[r][m] for m in chosen} for r in runs}
            with np.errstate(invalid="ignore"):
                spread = {r: {m: float(np.nanmax(np.abs(results[r][m].expected - base[r][m].expected), initial=0.0))
                              for m in chosen} for r in runs}
            same = {m: _order(point_means, m) == _order(base_means, m) for m in chosen}
            points.append(SensitivityPoint(float(alpha), float(cap4), float(cap3), point_means, delta, spread, same))
    return baseline, points

"""Canary comparison: paired, tie-aware deltas between the primary and the canary, and a verdict.

Golden queries replayed through both variants are paired by query id: the latest *replay* of each
query (mirrored evaluations run under a user's ``top_n`` and never pair). The service passes each
variant's window (:meth:`~.monitor.QualityWindow.replays`), which holds distinct queries, so a
query searched many times is still one pair, and a canary verdict weighs every golden query alike.
For every guarded measure, with ``d = canary − primary`` per query:

- ``delta``: paired bootstrap CI of mean d on the expected values;
- ``worst``: the same on ``canary.min − primary.max`` (the canary's worst tie order against the
  primary's best);
- ``best``: the same on ``canary.max − primary.min``;
- ``ranges_overlap``: whether the variants' mean [min, max] tie intervals overlap.

Verdict rules (``margin`` = non-inferiority margin; a verdict must hold at both ends of the
tie-aware intervals):

1. fewer than ``min_queries`` paired queries → ``hold``;
2. ``rollback`` if for some guarded measure even the best case is worse: ``best.high < −margin``;
3. ``promote`` if for every guarded measure even the worst case is non-inferior
   (``worst.low ≥ −margin``) and the canary's p95 replay latency is at most
   ``(1 + max_p95_latency_increase)`` × the primary's;
4. otherwise ``hold``.

Agreement on mirrored user traffic: mean top-10 overlap ``|A₁₀ ∩ B₁₀| / 10`` and mean Kendall τ-b
of the two variants' scores over the documents both ranked, one agreement per distinct query (the
service keeps the latest of each).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from steadyrank.metrics import ConfidenceInterval, paired_bootstrap
from steadyrank.serve.server.quality.kendall import kendall_tau_b
from steadyrank.serve.server.quality.monitor import GoldenEvaluation
from steadyrank.serve.settings.quality import CanaryRules

VERDICTS = ("promote", "hold", "rollback")


@dataclass(frozen=True)
class Agreement:
    """How similarly two variants ranked one mirrored request."""

    top10_overlap: float
    kendall_tau: float


def agreement(primary: Sequence[tuple[str, float]], canary: Sequence[tuple[str, float]]) -> Agreement:
    """Top-10 overlap and Kendall τ-b of two rankings (doc id, score) of the same request."""
    top_a = {doc for doc, _ in primary[:10]}
    top_b = {doc for doc, _ in canary[:10]}
    overlap = len(top_a & top_b) / 10
    scores_b = dict(canary)
    common = [(score, scores_b[doc]) for doc, score in primary if doc in scores_b]
    tau = float("nan")
    if len(common) >= 2:
        a, b = np.array(common).T
        tau = kendall_tau_b(a, b)
    return Agreement(overlap, tau)


def latest_by_query(evaluations: Sequence[GoldenEvaluation]) -> dict[str, GoldenEvaluation]:
    """The latest replay of each query in ``evaluations`` (mirrored evaluations never pair)."""
    latest: dict[str, GoldenEvaluation] = {}
    for e in evaluations:
        if e.source == "replay":
            latest[e.query_id] = e
    return latest


def latency_report(primary: Sequence[GoldenEvaluation], canary: Sequence[GoldenEvaluation]) -> dict[str, float]:
    """p95 replay latency (s) of each variant's paired evaluations, and the canary's minus the primary's."""
    def p95(evaluations: Sequence[GoldenEvaluation]) -> float:
        return float(np.percentile([e.latency_s for e in evaluations], 95)) if evaluations else float("nan")

    latency = {"primary_p95_s": p95(primary), "canary_p95_s": p95(canary)}
    latency["delta_p95_s"] = latency["canary_p95_s"] - latency["primary_p95_s"]
    return latency


def latency_holds(latency: dict[str, float], rules: CanaryRules) -> str | None:
    """None when the canary's p95 is within ``max_p95_latency_increase`` of the primary's, else why not."""
    limit = latency["primary_p95_s"] * (1 + rules.max_p95_latency_increase)
    if latency["canary_p95_s"] <= limit:
        return None
    return f"canary p95 latency {latency['canary_p95_s']:.4f}s above {limit:.4f}s"


def _interval(ci: ConfidenceInterval) -> dict[str, float]:
    return {"point": ci.estimate, "low": ci.low, "high": ci.high}


def compare(
    primary: Sequence[GoldenEvaluation],
    canary: Sequence[GoldenEvaluation],
    rules: CanaryRules,
    agreements: Sequence[Agreement] = (),
    *,
    seed: int | None = 0,
) -> dict:
    """The canary report: per guarded measure deltas and intervals, agreement, latency, verdict."""
    by_query_a, by_query_b = latest_by_query(primary), latest_by_query(canary)
    paired = sorted(set(by_query_a) & set(by_query_b))
    a = [by_query_a[q] for q in paired]
    b = [by_query_b[q] for q in paired]

    def column(evaluations: list[GoldenEvaluation], measure: str, stat: str) -> np.ndarray:
        return np.array([e.stats[measure][stat] for e in evaluations], dtype=np.float64)

    boot = {"n_resamples": rules.resamples, "confidence": rules.confidence, "seed": seed}
    per_metric: dict[str, dict] = {}
    for measure in rules.metrics:
        if not paired:
            break
        delta = paired_bootstrap(column(a, measure, "expected"), column(b, measure, "expected"), **boot)
        worst = paired_bootstrap(column(a, measure, "max"), column(b, measure, "min"), **boot)
        best = paired_bootstrap(column(a, measure, "min"), column(b, measure, "max"), **boot)
        interval_a = (np.nanmean(column(a, measure, "min")), np.nanmean(column(a, measure, "max")))
        interval_b = (np.nanmean(column(b, measure, "min")), np.nanmean(column(b, measure, "max")))
        per_metric[measure] = {
            "delta": _interval(delta), "worst": _interval(worst), "best": _interval(best),
            "primary_range": list(map(float, interval_a)), "canary_range": list(map(float, interval_b)),
            "ranges_overlap": bool(interval_a[0] <= interval_b[1] and interval_b[0] <= interval_a[1]),
            "n": delta.n,
        }

    latency = latency_report(a, b)
    verdict, reasons = decide(per_metric, latency, len(paired), rules)
    mirrored = {
        "n": len(agreements),
        "top10_overlap": float(np.mean([x.top10_overlap for x in agreements])) if agreements else float("nan"),
        "kendall_tau": float(np.nanmean([x.kendall_tau for x in agreements]))
        if agreements and not all(np.isnan(x.kendall_tau) for x in agreements) else float("nan"),
    }
    return {"verdict": verdict, "reasons": reasons, "paired_queries": len(paired), "metrics": per_metric,
            "latency": latency, "agreement": mirrored, "rules": rules.model_dump()}


def decide(per_metric: dict[str, dict], latency: dict[str, float], n_paired: int,
           rules: CanaryRules) -> tuple[str, list[str]]:
    """Apply the verdict rules of the module docstring; return the verdict and its reasons."""
    if n_paired < rules.min_queries:
        return "hold", [f"{n_paired} paired golden queries, {rules.min_queries} needed"]
    worse = [m for m, r in per_metric.items() if r["best"]["high"] < -rules.margin]
    if worse:
        return "rollback", [f"{m}: worse even in the canary's best tie order (best-case delta CI high "
                            f"{per_metric[m]['best']['high']:.4f} < -{rules.margin})" for m in worse]
    reasons = []
    inferior = [m for m, r in per_metric.items() if not r["worst"]["low"] >= -rules.margin]
    reasons += [f"{m}: not non-inferior in the worst tie order (worst-case delta CI low "
                f"{per_metric[m]['worst']['low']:.4f} < -{rules.margin})" for m in inferior]
    slow = latency_holds(latency, rules)
    if slow is not None:
        reasons.append(slow)
    if reasons:
        return "hold", reasons
    return "promote", [f"every guarded measure non-inferior (margin {rules.margin}) at both tie-aware ends"]

"""Per-segment verdicts: the canary against the primary, and the reranker against its first stage,
on each segment's golden queries, with multiple-testing control across segments.

Pairs are the golden replays of one query through two arms (the latest replay of each, as in
:mod:`.canary`), grouped by the golden query's segment. For each segment ``s`` and guarded measure
``m`` (``quality.canary.metrics``), with ``margin`` the non-inferiority margin and the tie-aware
ends of each query's value (``min``, ``max`` over its tie orders):

- **loss**: ``H0: mean(cand.max − base.min) ≥ −margin`` against ``<`` — the candidate is worse by
  more than the margin even in its best tie order against the baseline's worst;
- **non-inferiority**: ``H0: mean(cand.min − base.max) ≤ −margin`` against ``>`` — the candidate
  is within the margin even in its worst tie order against the baseline's best.

Each is a one-sided sign-flip (paired permutation) test of the shifted differences
(``scipy.stats.permutation_test``, ``permutation_type="samples"``: exact when ``2ⁿ`` ≤ the
resamples, else Monte Carlo): it assumes only that a difference is as likely positive as negative
under H0, which holds for the few queries a segment has, where a bootstrap interval is too narrow.
The p-values of each family (every loss test, every non-inferiority test, across the segments
with at least ``min_queries`` pairs) are adjusted together (:mod:`.multitest`, Holm or
Benjamini–Hochberg) and compared with ``α = 1 − canary.confidence``.

Canary verdict of a segment: ``hold`` under ``min_queries`` pairs; ``rollback`` when a measure's
loss is significant; ``promote`` when every measure's non-inferiority is significant and the
segment's canary p95 latency is within ``max_p95_latency_increase`` of the primary's; else
``hold``. Reranker verdict of a segment (first stage = the retrieval order of the same replay):
``loses`` when a measure's loss (reranked against first stage) is significant.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy.stats import permutation_test

from steadyrank.serve.server.quality.canary import latency_holds, latency_report, latest_by_query
from steadyrank.serve.server.quality.monitor import GoldenEvaluation
from steadyrank.serve.server.quality.multitest import adjusted_pvalues
from steadyrank.serve.settings.quality import CanaryRules, SegmentSettings

SegmentOf = Callable[[str], str]  # golden query id → its segment


def sign_flip_pvalue(x: np.ndarray, alternative: Literal["less", "greater"], resamples: int,
                     seed: int | None) -> float:
    """One-sided p-value of the sign-flip test of ``mean(x)`` against 0 (module docstring)."""
    if x.size == 0:
        return 1.0
    # ``random_state``: scipy 1.10 (the lowest supported) has no ``rng``; later versions take both, and
    # their stubs name only ``rng``, hence the keyword passed through a mapping
    seeding: dict[str, Any] = {"random_state": seed}
    result = permutation_test((x,), np.mean, permutation_type="samples", vectorized=True, n_resamples=resamples,
                              alternative=alternative, **seeding)
    return float(result.pvalue)


@dataclass(frozen=True)
class SegmentPairs:
    """One segment's paired replays: baseline and candidate evaluations of the same queries."""

    baseline: list[GoldenEvaluation]
    candidate: list[GoldenEvaluation]


def pair_by_segment(baseline: Sequence[GoldenEvaluation], candidate: Sequence[GoldenEvaluation],
                    segment_of: SegmentOf) -> dict[str, SegmentPairs]:
    """The latest replays of the queries both arms evaluated, grouped by segment (sorted by query id)."""
    a, b = latest_by_query(baseline), latest_by_query(candidate)
    segments: dict[str, SegmentPairs] = {}
    for query in sorted(set(a) & set(b)):
        pairs = segments.setdefault(segment_of(query), SegmentPairs([], []))
        pairs.baseline.append(a[query])
        pairs.candidate.append(b[query])
    return dict(sorted(segments.items()))


def _column(evaluations: list[GoldenEvaluation], measure: str, stat: str) -> np.ndarray:
    return np.array([e.stats[measure][stat] for e in evaluations], dtype=np.float64)


def _tests(pairs: SegmentPairs, rules: CanaryRules, seed: int | None) -> dict[str, dict[str, float]]:
    """Per guarded measure: pairs defined (``n``), mean expected delta, and the raw loss and
    non-inferiority p-values (module docstring)."""
    out = {}
    for measure in rules.metrics:
        base = {s: _column(pairs.baseline, measure, s) for s in ("expected", "min", "max")}
        cand = {s: _column(pairs.candidate, measure, s) for s in ("expected", "min", "max")}
        defined = ~np.isnan(base["expected"]) & ~np.isnan(cand["expected"])
        best = (cand["max"] - base["min"])[defined] + rules.margin
        worst = (cand["min"] - base["max"])[defined] + rules.margin
        delta = (cand["expected"] - base["expected"])[defined]
        out[measure] = {"n": int(defined.sum()), "delta": float(delta.mean()) if delta.size else float("nan"),
                        "p_loss": sign_flip_pvalue(best, "less", rules.resamples, seed),
                        "p_noninferior": sign_flip_pvalue(worst, "greater", rules.resamples, seed)}
    return out


def _adjust(tests: dict[str, dict[str, dict[str, float]]], key: str, settings: SegmentSettings) -> None:
    """Add ``<key>_adjusted`` to every test of ``tests`` (segment → measure → test), adjusted as one family."""
    cells = [(s, m) for s, measures in tests.items() for m in measures]
    adjusted = adjusted_pvalues([tests[s][m][key] for s, m in cells], settings.correction)
    for (s, m), value in zip(cells, adjusted, strict=True):
        tests[s][m][f"{key}_adjusted"] = float(value)


def _tested(by_segment: dict[str, SegmentPairs], rules: CanaryRules, settings: SegmentSettings,
            seed: int | None) -> dict[str, dict[str, dict[str, float]]]:
    """The tests of the segments with at least ``min_queries`` pairs, both families adjusted."""
    tests = {s: _tests(p, rules, seed) for s, p in by_segment.items() if len(p.baseline) >= settings.min_queries}
    _adjust(tests, "p_loss", settings)
    _adjust(tests, "p_noninferior", settings)
    return tests


def _alpha(rules: CanaryRules) -> float:
    """The level of each family, ``1 − confidence`` (rounded: 0.05, not 0.050000000000000044)."""
    return round(1 - rules.confidence, 12)


def _family(rules: CanaryRules, settings: SegmentSettings) -> dict[str, object]:
    return {"correction": settings.correction, "alpha": _alpha(rules), "min_queries": settings.min_queries,
            "metrics": list(rules.metrics), "margin": rules.margin}


def canary_segments(primary: Sequence[GoldenEvaluation], canary: Sequence[GoldenEvaluation], segment_of: SegmentOf,
                    rules: CanaryRules, settings: SegmentSettings, *, seed: int | None = 0) -> dict:
    """Per segment: the canary verdict (module docstring), its reasons, pairs, tests and latency."""
    by_segment = pair_by_segment(primary, canary, segment_of)
    tests = _tested(by_segment, rules, settings, seed)
    alpha = _alpha(rules)
    segments = {}
    for segment, pairs in by_segment.items():
        latency = latency_report(pairs.baseline, pairs.candidate)
        verdict, reasons = "hold", [f"{len(pairs.baseline)} paired golden queries, {settings.min_queries} needed"]
        if segment in tests:
            measures = tests[segment]
            lost = [m for m, t in measures.items() if t["p_loss_adjusted"] <= alpha]
            unproven = [m for m, t in measures.items() if not t["p_noninferior_adjusted"] <= alpha]
            slow = latency_holds(latency, rules)
            if lost:
                verdict = "rollback"
                reasons = [f"{m}: worse even in the canary's best tie order (adjusted p "
                           f"{measures[m]['p_loss_adjusted']:.4g} ≤ {alpha:.4g})" for m in lost]
            elif unproven or slow:
                reasons = [f"{m}: non-inferiority not shown (adjusted p {measures[m]['p_noninferior_adjusted']:.4g} "
                           f"> {alpha:.4g})" for m in unproven] + ([slow] if slow else [])
            else:
                verdict, reasons = "promote", [f"every guarded measure non-inferior (margin {rules.margin}) at "
                                               f"adjusted p ≤ {alpha:.4g}"]
        segments[segment] = {"verdict": verdict, "reasons": reasons, "paired_queries": len(pairs.baseline),
                             "metrics": tests.get(segment, {}), "latency": latency}
    return {**_family(rules, settings), "segments": segments}


def reranker_segments(first_stage: Sequence[GoldenEvaluation], reranked: Sequence[GoldenEvaluation],
                      segment_of: SegmentOf, rules: CanaryRules, settings: SegmentSettings, *,
                      seed: int | None = 0) -> dict:
    """Per segment: whether the reranker loses to the first stage (module docstring), with its tests."""
    by_segment = pair_by_segment(first_stage, reranked, segment_of)
    tests = _tested(by_segment, rules, settings, seed)
    alpha = _alpha(rules)
    segments = {}
    for segment, pairs in by_segment.items():
        measures = tests.get(segment, {})
        lost = [m for m, t in measures.items() if t["p_loss_adjusted"] <= alpha]
        segments[segment] = {"loses": bool(lost), "paired_queries": len(pairs.baseline), "metrics": measures,
                             "reasons": [f"{m}: reranked order worse than the first stage's even at its best tie order "
                                         f"(adjusted p {measures[m]['p_loss_adjusted']:.4g} ≤ {alpha:.4g})"
                                         for m in lost]}
    return {**_family(rules, settings), "segments": segments}

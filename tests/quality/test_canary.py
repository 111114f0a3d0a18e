"""Canary verdict rules on constructed deltas, and the agreement measures."""

from __future__ import annotations

import pytest

from steadyrank.serve.server.quality.canary import agreement, compare
from steadyrank.serve.server.quality.monitor import GoldenEvaluation
from steadyrank.serve.settings.quality import CanaryRules

RULES = CanaryRules(metrics=["ndcg@10"], margin=0.01, min_queries=10, resamples=500)


def evaluations(variant, values, spread=0.0, latency=0.1):
    """One replay evaluation per query with ndcg@10 expected = value, min/max = value ∓ spread."""
    return [
        GoldenEvaluation(f"q{i}", variant, "replay",
                         {"ndcg@10": {"expected": v, "min": v - spread, "max": v + spread}},
                         False, 0, False, 50, latency)
        for i, v in enumerate(values)
    ]


BASE = [0.5 + 0.02 * (i % 7) for i in range(30)]


def test_clear_improvement_promotes():
    report = compare(evaluations("primary", BASE), evaluations("canary", [v + 0.05 for v in BASE]), RULES)
    assert report["verdict"] == "promote"
    assert report["metrics"]["ndcg@10"]["delta"]["point"] == pytest.approx(0.05)
    assert report["paired_queries"] == 30


def test_clear_regression_rolls_back():
    report = compare(evaluations("primary", BASE), evaluations("canary", [v - 0.1 for v in BASE]), RULES)
    assert report["verdict"] == "rollback"


def test_improvement_inside_the_tie_interval_holds():
    """The expected values improve, but the worst tie order of the canary does not: no promote."""
    report = compare(evaluations("primary", BASE, spread=0.05), evaluations("canary", [v + 0.03 for v in BASE], spread=0.05), RULES)
    assert report["verdict"] == "hold"
    assert report["metrics"]["ndcg@10"]["ranges_overlap"] is True


def test_regression_inside_the_tie_interval_holds_rather_than_rolling_back():
    report = compare(evaluations("primary", BASE, spread=0.05), evaluations("canary", [v - 0.03 for v in BASE], spread=0.05), RULES)
    assert report["verdict"] == "hold"


def test_too_few_queries_and_slow_canary_hold():
    few = compare(evaluations("primary", BASE[:5]), evaluations("canary", [v + 0.2 for v in BASE[:5]]), RULES)
    assert few["verdict"] == "hold" and "needed" in few["reasons"][0]
    slow = compare(evaluations("primary", BASE), evaluations("canary", [v + 0.05 for v in BASE], latency=0.5), RULES)
    assert slow["verdict"] == "hold" and "latency" in slow["reasons"][0]


def test_agreement_overlap_and_kendall_tau():
    a = [(f"d{i}", 1 - i / 20) for i in range(20)]
    same = agreement(a, a)
    assert same.top10_overlap == 1.0 and same.kendall_tau == pytest.approx(1.0)
    reversed_b = [(d, -s) for d, s in a]
    flipped = agreement(a, reversed_b[::-1])
    assert flipped.kendall_tau == pytest.approx(-1.0)
    assert agreement(a[:10], a[10:]).top10_overlap == 0.0

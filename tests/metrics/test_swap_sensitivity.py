"""Swap rates, the spread across cutoffs and RA-nWG's parameters against hand computations."""

from __future__ import annotations

import numpy as np
import pytest

from steadyrank.metrics import MetricParams, evaluate
from steadyrank.metrics.sensitivity import ra_nwg_sensitivity
from steadyrank.metrics.swap import SWAP_BINS, cutoff_spread, swap_rates


def test_two_queries_that_disagree_always_swap():
    """Halves of one query each: d_X is one query's difference, d_Y the other's, of opposite signs."""
    per_query = {"a": {"m@1": np.array([0.75, 0.25])}, "b": {"m@1": np.array([0.625, 0.3125])}}  # +1/8, -1/16
    (rate,) = swap_rates(per_query, ["m@1"], trials=200, seed=3)
    assert rate.splits == 200 and rate.swaps == 200 and rate.rate == 1.0
    used = {(b.low, b.splits) for b in rate.bins if b.splits}
    assert {low for low, _ in used} == {0.06, 0.12} and sum(n for _, n in used) == 200


def test_a_run_better_on_every_query_never_swaps_and_bins_cover_everything():
    rng = np.random.default_rng(0)
    base = rng.uniform(0, 0.5, size=40)
    per_query = {"a": {"m@1": base + rng.uniform(0.01, 0.3, size=40)}, "b": {"m@1": base}, "c": {"m@1": base - 0.001}}
    (rate,) = swap_rates(per_query, ["m@1"], trials=50)
    assert rate.pairs == 3 and rate.splits == 150 and rate.swaps == 0
    assert sum(b.splits for b in rate.bins) == rate.splits
    assert [b.low for b in rate.bins] == list(SWAP_BINS) and rate.bins[-1].high is None


def test_swap_rate_counts_sign_flips_by_bin():
    """Four queries, halves of two: the six splits of {+3/8, +1/8, -1/4, 0} by hand."""
    per_query = {"a": {"m@1": np.array([0.375, 0.125, -0.25, 0.0])}, "b": {"m@1": np.zeros(4)}}
    (rate,) = swap_rates(per_query, ["m@1"], trials=3000, seed=1)
    # X = {0,1}: d_X 1/4, d_Y -1/8 (swap); {2,3}: -1/8 / 1/4 (swap); {0,2}: 1/16 / 1/16; {1,3}: 1/16 / 1/16;
    # {0,3}: 3/16 / -1/16 (swap); {1,2}: -1/16 / 3/16 (swap). Each X has probability 1/6.
    assert rate.rate == pytest.approx(4 / 6, abs=0.03)
    by_low = {b.low: b for b in rate.bins if b.splits}
    assert set(by_low) == {0.06, 0.12, 0.18, 0.2}
    assert by_low[0.12].rate == 1.0 and by_low[0.18].rate == 1.0 and by_low[0.2].rate == 1.0
    assert by_low[0.06].rate == pytest.approx(1 / 3, abs=0.05)


def test_cutoff_spread_is_the_population_std_of_the_means():
    spread = cutoff_spread({"ndcg@5": 0.4, "ndcg@10": 0.5, "ndcg@20": 0.6, "err@10": 0.3})
    assert list(spread) == ["ndcg"] and spread["ndcg"]["cutoffs"] == [5, 10, 20]
    assert spread["ndcg"]["std"] == pytest.approx(np.sqrt(2 / 3) * 0.1)


# RA-nWG parameters: a pool with n5 = 1, n4 = 4, n3 = 2 (N = 7, plus one grade-1 item).
QRELS = {"q": {"five": 5, "f1": 4, "f2": 4, "f3": 4, "f4": 4, "t1": 3, "t2": 3, "one": 1}}
RUN = {"q": {"f1": 0.9, "t1": 0.8, "five": 0.1}}


@pytest.mark.parametrize("alpha, cap4, cap3, w4, w3", [
    (1.0, 1.0, 0.25, 0.5 * (1 / 4), 0.1 * (1 / 2)),  # r_g/r_5 = (b_g/b_5)(n5/n_g)^α: 0.125, 0.05
    (2.0, 1.0, 0.25, 0.5 * (1 / 16), 0.1 * (1 / 4)),  # 0.03125, 0.025
    (0.0, 0.3, 0.06, 0.3, 0.06),  # α = 0: 0.5 and 0.1, capped at 0.3 and 0.06
])
def test_rarity_alpha_and_caps_by_hand(alpha, cap4, cap3, w4, w3):
    params = MetricParams(rarity_alpha=alpha, rarity_cap4=cap4, rarity_cap3=cap3)
    result = evaluate(RUN, QRELS, ["ra_nwg@2"], params=params)
    # top 2 = f1 (w4) and t1 (w3); ideal 2 = five (1) + the larger of w4, w3
    assert result["ra_nwg@2"].expected[0] == pytest.approx((w4 + w3) / (1 + max(w4, w3)))


def test_parameters_are_validated():
    for bad in (dict(rarity_alpha=-1), dict(rarity_cap3=float("nan")), dict(novelty_beta=1.0), dict(udcg_distraction=-0.1)):
        with pytest.raises(ValueError):
            MetricParams(**bad)


def test_sensitivity_report_over_the_grid():
    runs = {"good": RUN, "flipped": {"q": {"five": 0.9, "one": 0.8, "f1": 0.1}}}
    baseline, points = ra_nwg_sensitivity(runs, QRELS, ["ra_nwg@2", "ndcg@2"], alphas=[1.0, 0.0],
                                          caps=[(1.0, 0.25), (0.3, 0.06)])
    assert baseline == MetricParams() and len(points) == 4
    first = points[0]
    assert (first.alpha, first.cap4, first.cap3) == (1.0, 1.0, 0.25)
    assert first.delta["good"]["ra_nwg@2"] == 0.0 and first.max_query_delta["good"]["ra_nwg@2"] == 0.0
    assert set(first.mean["good"]) == {"ra_nwg@2"}  # only RA-nWG measures
    last = points[-1]
    expected = (0.3 + 0.06) / (1 + 0.3)
    assert last.mean["good"]["ra_nwg@2"] == pytest.approx(expected)
    assert last.delta["good"]["ra_nwg@2"] == pytest.approx(expected - first.mean["good"]["ra_nwg@2"])
    # "flipped" holds grade 5 and grade 1: 1 / (1 + max(w4, w3)) ≥ 1/1.3, above "good" ≤ 0.36/1.3 everywhere.
    assert first.mean["flipped"]["ra_nwg@2"] == pytest.approx(1 / 1.125)
    assert all(p.same_order["ra_nwg@2"] for p in points)
    with pytest.raises(ValueError, match="needs an RA-nWG measure"):
        ra_nwg_sensitivity(runs, QRELS, ["ndcg@2"])


def test_udcg_refuses_a_tie_too_varied_to_enumerate_before_enumerating():
    """25 relevant passages with distinct utilities tie across the cutoff: 2^24 subset classes > the limit."""
    from steadyrank.metrics import ItemLabels
    from steadyrank.metrics.udcg import MAX_SUBSET_CLASSES

    docs = [f"d{i}" for i in range(25)]
    run = {"q": {d: 0.5 for d in docs}}
    qrels = {"q": {d: 1 for d in docs}}
    labels = ItemLabels(utility={"q": {d: i / 25 for i, d in enumerate(docs)}}, distraction={"q": {}})
    assert 2**24 > MAX_SUBSET_CLASSES
    with pytest.raises(ValueError, match="subset classes"):
        evaluate(run, qrels, ["udcg@5"], labels=labels)
    # the fixed orders need no enumeration: the oblivious value of a smaller, equally varied tie is there
    small = {"q": {d: 0.5 for d in docs[:6]}}
    result = evaluate(small, {"q": {d: 1 for d in docs[:6]}}, ["udcg@3"], labels=labels)
    assert 0.5 < result["udcg@3"].min[0] <= result["udcg@3"].expected[0] <= result["udcg@3"].max[0] < 1

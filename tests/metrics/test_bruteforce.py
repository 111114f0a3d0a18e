"""Closed forms against brute force: every statistic equals enumeration of all tie orders."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steadyrank.metrics import evaluate
from steadyrank.metrics.measures import METRIC_KEYS
from tests.metrics.reference import metric, tie_orders

ALL_METRICS = sorted(METRIC_KEYS)
RUBRIC = {0: 1, 1: 3, 2: 4, 3: 5}


@st.composite
def tied_queries(draw):
    """A small candidate list with heavy ties (scores from 3 values) and graded judgments."""
    n = draw(st.integers(1, 7))
    scores = draw(st.lists(st.sampled_from([0.1, 0.5, 0.9]), min_size=n, max_size=n))
    grades = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    extra_judged = draw(st.lists(st.integers(0, 3), max_size=3))  # judged docs the run missed
    k = draw(st.integers(1, 8))
    rel_level = draw(st.sampled_from([1, 2]))
    return scores, grades, extra_judged, k, rel_level


def _inputs(scores, grades, extra_judged):
    docids = [f"d{i}" for i in range(len(scores))]
    run = {"q": dict(zip(docids, scores))}
    judged = {d: g for d, g in zip(docids, grades) if g > 0}
    judged.update({f"x{i}": g for i, g in enumerate(extra_judged)})
    return docids, run, {"q": judged}


def _brute(name, k, scores, grades, judged_grades, rel_level, gmax, orders):
    rubric = [RUBRIC[g] for g in grades]
    judged_rubric = [RUBRIC[g] for g in judged_grades]
    values = [metric(name, k, [grades[i] for i in o], judged_grades, rel_level=rel_level, gmax=gmax,
                     rubric=[rubric[i] for i in o], judged_rubric=judged_rubric) for o in orders]
    return values


@settings(max_examples=150, deadline=None)
@given(tied_queries())
def test_every_statistic_matches_enumeration(case):
    scores, grades, extra_judged, k, rel_level = case
    docids, run, qrels = _inputs(scores, grades, extra_judged)
    judged_grades = list(qrels["q"].values())
    gmax = max(judged_grades + grades + [1])
    result = evaluate(run, qrels, [f"{m}@{k}" for m in ALL_METRICS], rel_level=rel_level, rubric_map=RUBRIC)
    orders = list(tie_orders(scores))
    all_orders = list(itertools.permutations(range(len(scores))))
    for name in ALL_METRICS:
        stats = result[f"{name}@{k}"]
        values = _brute(name, k, scores, grades, judged_grades, rel_level, gmax, orders)
        if values[0] is None:
            assert np.isnan(stats.expected[0]) and np.isnan(stats.max[0]), name
            continue
        assert stats.expected[0] == pytest.approx(sum(values) / len(values), abs=1e-9), name
        assert stats.min[0] == pytest.approx(min(values), abs=1e-9), name
        assert stats.max[0] == pytest.approx(max(values), abs=1e-9), name
        input_order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        oblivious = _brute(name, k, scores, grades, judged_grades, rel_level, gmax, [input_order])[0]
        assert stats.oblivious[0] == pytest.approx(oblivious, abs=1e-9), name
        pool = _brute(name, k, scores, grades, judged_grades, rel_level, gmax, all_orders)
        best = min(pool) if name == "harm" else max(pool)
        assert stats.proc[0] == pytest.approx(best, abs=1e-9), name


@settings(max_examples=60, deadline=None)
@given(tied_queries())
def test_docid_tie_break_is_trec_eval_order(case):
    scores, grades, extra_judged, k, rel_level = case
    docids, run, qrels = _inputs(scores, grades, extra_judged)
    result = evaluate(run, qrels, [f"ndcg@{k}", f"map@{k}"], rel_level=rel_level, tie_break="docid")
    # trec_eval: score descending, then docid descending
    order = sorted(range(len(scores)), key=lambda i: (scores[i], docids[i]), reverse=True)
    judged_grades = list(qrels["q"].values())
    for name in ("ndcg", "map"):
        expected = metric(name, k, [grades[i] for i in order], judged_grades, rel_level=rel_level)
        got = result[f"{name}@{k}"].oblivious[0]
        assert (expected is None and np.isnan(got)) or got == pytest.approx(expected, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.lists(tied_queries(), min_size=2, max_size=6))
def test_batch_equals_one_query_at_a_time(cases):
    """Padding and batching never change a query's numbers."""
    k = max(c[3] for c in cases)
    run, qrels = {}, {}
    for i, (scores, grades, extra, _, _) in enumerate(cases):
        _, r, q = _inputs(scores, grades, extra)
        run[f"q{i}"], qrels[f"q{i}"] = r["q"], q["q"]
    measures = [f"{m}@{k}" for m in ALL_METRICS]
    together = evaluate(run, qrels, measures, rubric_map=RUBRIC, gmax=3)
    for i, qid in enumerate(together.query_ids):
        alone = evaluate({qid: run[qid]}, {qid: qrels[qid]}, measures, rubric_map=RUBRIC, gmax=3)
        for m in measures:
            for stat in ("expected", "min", "max", "oblivious", "proc"):
                a, b = together[m].stat(stat)[i], alone[m].stat(stat)[0]
                assert (np.isnan(a) and np.isnan(b)) or a == pytest.approx(b, abs=1e-12), (m, stat)


def test_large_tie_group_err_and_rr_against_direct_sum():
    """A 12-item tie (479M orders) checked against a combinatorial sum over relevant positions."""
    grades = [3, 2, 2] + [0] * 9
    run = {"q": {f"d{i}": 1.0 for i in range(12)}}
    qrels = {"q": {f"d{i}": g for i, g in enumerate(grades) if g}}
    result = evaluate(run, qrels, ["mrr@5", "hits@5"])
    # RR: the first relevant position among 12 with 3 relevant is uniform-without-replacement.
    expected_rr = sum(
        (1 / (t + 1)) * math.comb(12 - 1 - t, 2) / math.comb(12, 3) for t in range(5)
    )
    assert result["mrr@5"].expected[0] == pytest.approx(expected_rr, abs=1e-12)
    assert result["hits@5"].expected[0] == pytest.approx(5 * 3 / 12, abs=1e-12)

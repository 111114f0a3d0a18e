"""Closed forms against brute force: every statistic equals enumeration of all tie orders."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steadyrank.metrics import ItemLabels, MetricParams, evaluate
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


@st.composite
def labelled(draw, n: int, n_extra: int):
    """Sources (three, or none) for every candidate and extra judged doc; UDCG labels for the candidates."""
    source = st.sampled_from([None, "s0", "s1", "s2"])
    sources = draw(st.lists(source, min_size=n + n_extra, max_size=n + n_extra))
    label = st.sampled_from([None, 0.0, 0.5, 1.0])
    utility = draw(st.lists(label, min_size=n, max_size=n))
    distraction = draw(st.lists(label, min_size=n, max_size=n))
    params = MetricParams(
        rarity_alpha=draw(st.sampled_from([1.0, 0.5, 2.0])), rarity_cap4=draw(st.sampled_from([1.0, 0.5])),
        rarity_cap3=draw(st.sampled_from([0.25, 0.1, 1.0])), novelty_beta=draw(st.sampled_from([0.0, 0.5, 0.9])),
        udcg_distraction=draw(st.sampled_from([1 / 3, 1.0])),
    )
    return sources, utility, distraction, params


def _inputs(scores, grades, extra_judged):
    docids = [f"d{i}" for i in range(len(scores))]
    run = {"q": dict(zip(docids, scores))}
    judged = {d: g for d, g in zip(docids, grades) if g > 0}
    judged.update({f"x{i}": g for i, g in enumerate(extra_judged)})
    return docids, run, {"q": judged}


def _brute(name, k, grades, judged, rel_level, gmax, orders, extras=None):
    """The reference metric on every order of candidate indices; ``judged`` maps docid → grade."""
    judged_ids, judged_grades = list(judged), list(judged.values())
    rubric = [RUBRIC[g] for g in grades]
    judged_rubric = [RUBRIC[g] for g in judged_grades]
    kwargs = {}
    if extras is not None:
        sources, utility, distraction, params = extras
        source_of = {f"d{i}": s for i, s in enumerate(sources[: len(grades)])}
        source_of.update({f"x{i}": s for i, s in enumerate(sources[len(grades):])})
        own = [source_of.get(f"d{i}") or f"d{i}" for i in range(len(grades))]
        kwargs = dict(alpha=params.rarity_alpha, cap4=params.rarity_cap4, cap3=params.rarity_cap3,
                      beta=params.novelty_beta, distraction_weight=params.udcg_distraction,
                      judged_sources=[source_of.get(d) or d for d in judged_ids])
    values = []
    for o in orders:
        if extras is not None:
            kwargs.update(sources=[own[i] for i in o], utility=[1.0 if utility[i] is None else utility[i] for i in o],
                          distraction=[0.0 if distraction[i] is None else distraction[i] for i in o])
        values.append(metric(name, k, [grades[i] for i in o], judged_grades, rel_level=rel_level, gmax=gmax,
                             rubric=[rubric[i] for i in o], judged_rubric=judged_rubric, **kwargs))
    return values


def _labels(docids, extras):
    sources, utility, distraction, _ = extras
    names = docids + [f"x{i}" for i in range(len(sources) - len(docids))]
    return ItemLabels(
        sources={d: s for d, s in zip(names, sources) if s is not None},
        utility={"q": {d: u for d, u in zip(docids, utility) if u is not None}},
        distraction={"q": {d: x for d, x in zip(docids, distraction) if x is not None}},
    )


@settings(max_examples=250, deadline=None)
@given(tied_queries(), st.data())
def test_every_statistic_matches_enumeration(case, data):
    scores, grades, extra_judged, k, rel_level = case
    extras = data.draw(labelled(len(scores), len(extra_judged)))
    docids, run, qrels = _inputs(scores, grades, extra_judged)
    judged = qrels["q"]
    gmax = max(list(judged.values()) + grades + [1])
    result = evaluate(run, qrels, [f"{m}@{k}" for m in ALL_METRICS], rel_level=rel_level, rubric_map=RUBRIC,
                      params=extras[3], labels=_labels(docids, extras))
    orders = list(tie_orders(scores))
    all_orders = list(itertools.permutations(range(len(scores))))
    input_order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    for name in ALL_METRICS:
        stats = result[f"{name}@{k}"]
        values = _brute(name, k, grades, judged, rel_level, gmax, orders, extras)
        if values[0] is None:
            assert np.isnan(stats.expected[0]) and np.isnan(stats.max[0]), name
            continue
        assert stats.expected[0] == pytest.approx(sum(values) / len(values), abs=1e-9), name
        assert stats.min[0] == pytest.approx(min(values), abs=1e-9), name
        assert stats.max[0] == pytest.approx(max(values), abs=1e-9), name
        oblivious = _brute(name, k, grades, judged, rel_level, gmax, [input_order], extras)[0]
        assert stats.oblivious[0] == pytest.approx(oblivious, abs=1e-9), name
        pool = _brute(name, k, grades, judged, rel_level, gmax, all_orders, extras)
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
@given(st.lists(tied_queries(), min_size=2, max_size=6), st.data())
def test_batch_equals_one_query_at_a_time(cases, data):
    """Padding and batching never change a query's numbers."""
    k = max(c[3] for c in cases)
    run, qrels, sources, utility, distraction = {}, {}, {}, {}, {}
    params = MetricParams(novelty_beta=0.3)
    for i, (scores, grades, extra, _, _) in enumerate(cases):
        docids, r, q = _inputs(scores, grades, extra)
        labels = _labels(docids, data.draw(labelled(len(scores), len(extra))))
        rename = {d: f"q{i}-{d}" for d in list(r["q"]) + list(q["q"])}
        run[f"q{i}"] = {rename[d]: v for d, v in r["q"].items()}
        qrels[f"q{i}"] = {rename[d]: v for d, v in q["q"].items()}
        sources.update({rename[d]: s for d, s in labels.sources.items()})
        utility[f"q{i}"] = {rename[d]: v for d, v in labels.utility["q"].items()}
        distraction[f"q{i}"] = {rename[d]: v for d, v in labels.distraction["q"].items()}
    labels = ItemLabels(sources, utility, distraction)
    measures = [f"{m}@{k}" for m in ALL_METRICS]
    together = evaluate(run, qrels, measures, rubric_map=RUBRIC, gmax=3, labels=labels, params=params)
    for i, qid in enumerate(together.query_ids):
        alone = evaluate({qid: run[qid]}, {qid: qrels[qid]}, measures, rubric_map=RUBRIC, gmax=3, labels=labels,
                         params=params)
        for m in measures:
            for stat in ("expected", "min", "max", "oblivious", "proc"):
                a, b = together[m].stat(stat)[i], alone[m].stat(stat)[0]
                assert (np.isnan(a) and np.isnan(b)) or a == pytest.approx(b, abs=1e-12), (m, stat)


def test_large_tie_group_err_and_rr_against_direct_sum():
    """A 12-item tie (479M orders) checked against a combinatorial sum over relevant positions."""
    grades = [3, 2, 2] + [0] * 9
    run = {"q": {f"d{i}": 1.0 for i in range(12)}}
    qrels = {"q": {f"d{i}": g for i, g in enumerate(grades) if g}}
    result = evaluate(run, qrels, ["mrr@5", "hits@5", "hit@5"])
    # RR: the first relevant position among 12 with 3 relevant is uniform-without-replacement.
    expected_rr = sum(
        (1 / (t + 1)) * math.comb(12 - 1 - t, 2) / math.comb(12, 3) for t in range(5)
    )
    assert result["mrr@5"].expected[0] == pytest.approx(expected_rr, abs=1e-12)
    assert result["hits@5"].expected[0] == pytest.approx(5 * 3 / 12, abs=1e-12)
    # Hit: all three relevant among the 5 drawn of 12.
    assert result["hit@5"].expected[0] == pytest.approx(math.comb(9, 2) / math.comb(12, 5), abs=1e-12)

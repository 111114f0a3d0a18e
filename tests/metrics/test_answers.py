"""Acc|Hit@K against enumeration of every tie order of every query at once, and a hand computation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steadyrank.metrics import evaluate
from steadyrank.metrics.answers import accuracy_given_hit, poisson_binomial
from tests.metrics.reference import metric, tie_orders


@st.composite
def queries(draw):
    """2–3 queries of 1–4 tied candidates, each with an answer right or wrong."""
    out = []
    for _ in range(draw(st.integers(2, 3))):
        n = draw(st.integers(1, 4))
        scores = draw(st.lists(st.sampled_from([0.2, 0.7]), min_size=n, max_size=n))
        grades = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
        missed = draw(st.integers(0, 1))  # a relevant document the run did not retrieve
        out.append((scores, grades, missed, draw(st.booleans())))
    return out, draw(st.integers(1, 4))


def _stats(result, measure):
    s = result[measure]
    return s.expected, s.min, s.max, s.oblivious, s.proc


@settings(max_examples=150, deadline=None)
@given(queries())
def test_acc_given_hit_matches_enumeration_over_all_queries_tie_orders(case):
    cases, k = case
    run, qrels, correct = {}, {}, []
    for i, (scores, grades, missed, right) in enumerate(cases):
        run[f"q{i}"] = {f"d{j}": s for j, s in enumerate(scores)}
        qrels[f"q{i}"] = {f"d{j}": g for j, g in enumerate(grades) if g} | ({"gone": 1} if missed else {})
        correct.append(right)
    result = evaluate(run, qrels, [f"hit@{k}"])
    got = accuracy_given_hit(*_stats(result, f"hit@{k}"), correct=np.array(correct))

    per_query_hits = []  # every tie order's Hit@k, per evaluated query
    defined = []
    for i, (scores, grades, _, _) in enumerate(cases):
        judged = list(qrels[f"q{i}"].values())
        hits = [metric("hit", k, [grades[j] for j in order], judged) for order in tie_orders(scores)]
        defined.append(hits[0] is not None)
        per_query_hits.append(hits)
    keep = [i for i in range(len(cases)) if defined[i]]
    ratios = []
    for combo in itertools.product(*(per_query_hits[i] for i in keep)):  # every order of every query, equally likely
        total = sum(combo)
        ratios.append(None if total == 0 else sum(h for h, i in zip(combo, keep, strict=True) if correct[i]) / total)
    possible = [r for r in ratios if r is not None]
    if not possible:
        assert np.isnan(got.expected) and np.isnan(got.max)
        return
    assert got.expected == pytest.approx(sum(possible) / len(possible), abs=1e-12)
    assert got.min == pytest.approx(min(possible), abs=1e-12)
    assert got.max == pytest.approx(max(possible), abs=1e-12)
    assert got.n_queries == len(keep)


def test_hand_computed_example():
    """Two free queries (p = 1/2 each), one right and one wrong, plus a sure hit answered right.

    A ~ 1 + Bernoulli(1/2), B ~ Bernoulli(1/2): E = ¼(1/1) + ¼(2/2) + ¼(1/2) + ¼(2/3) = 19/24.
    """
    expected = np.array([1.0, 0.5, 0.5])
    low, high = np.array([1.0, 0.0, 0.0]), np.array([1.0, 1.0, 1.0])
    got = accuracy_given_hit(expected, low, high, high, high, correct=np.array([True, True, False]))
    assert got.expected == pytest.approx(19 / 24)
    assert got.max == 1.0 and got.min == pytest.approx(1 / 2)
    assert got.oblivious == pytest.approx(2 / 3) and got.expected_hits == 2.0


def test_poisson_binomial_is_a_distribution_of_the_sum():
    p = np.array([0.2, 0.5, 0.9])
    brute = np.zeros(4)
    for bits in itertools.product([0, 1], repeat=3):
        brute[sum(bits)] += np.prod([pi if b else 1 - pi for pi, b in zip(p, bits, strict=True)])
    np.testing.assert_allclose(poisson_binomial(p), brute, atol=1e-15)

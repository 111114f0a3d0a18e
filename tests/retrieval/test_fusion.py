"""Reciprocal rank fusion against its definition, computed exactly with fractions."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyrank.retrieval.fusion import reciprocal_rank_fusion

ranked_lists = st.lists(
    st.lists(st.integers(0, 30), unique=True, max_size=15), min_size=1, max_size=4
)


def definition(rankings, k, weights):
    """RRF(d) = Σ_i w_i / (k + rank_i(d)), exactly."""
    scores: dict[int, Fraction] = {}
    for ranking, w in zip(rankings, weights, strict=True):
        for rank, d in enumerate(ranking, start=1):
            scores[d] = scores.get(d, Fraction(0)) + Fraction(w) / (k + rank)
    return scores


@given(ranked_lists, st.sampled_from([0, 1, 60]), st.data())
def test_rrf_equals_its_definition(rankings, k, data):
    weights = data.draw(st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=len(rankings), max_size=len(rankings)))
    ids, scores = reciprocal_rank_fusion(rankings, k=k, weights=weights)
    exact = definition(rankings, k, [Fraction(w) for w in weights])
    assert set(ids) == set(exact)
    for doc, score in zip(ids, scores, strict=True):
        assert score == pytest.approx(float(exact[doc]), rel=1e-12)
    values = [exact[d] for d in ids]
    assert all(a >= b or float(a) == pytest.approx(float(b), rel=1e-12)
               for a, b in zip(values, values[1:], strict=False))


def test_rrf_known_values_ties_and_limit():
    ids, scores = reciprocal_rank_fusion([["a", "b", "c"], ["b", "d"]], k=60)
    assert ids == ["b", "a", "d", "c"]
    assert scores[0] == 1 / 62 + 1 / 61
    assert scores[2] == scores[1] - (1 / 61 - 1 / 62)  # a (rank 1) and d (rank 2) differ
    tied_ids, tied = reciprocal_rank_fusion([["x", "y"], ["y", "x"]], k=60)
    assert tied[0] == tied[1] and tied_ids == ["x", "y"]  # a true tie stays a tie; first appearance first
    assert reciprocal_rank_fusion([["a", "b", "c"]], limit=2)[0] == ["a", "b"]


def test_rrf_weights_shift_the_order_and_errors():
    assert reciprocal_rank_fusion([["a", "b"], ["b", "a"]], weights=[1.0, 3.0])[0] == ["b", "a"]
    with pytest.raises(ValueError, match="weights"):
        reciprocal_rank_fusion([["a"], ["b"]], weights=[1.0])
    with pytest.raises(ValueError, match="twice"):
        reciprocal_rank_fusion([["a", "a"]])

"""Plackett–Luce math and the lock DAG: gradient and Fisher information against finite differences,
no cycle ever, topological order respects every lock, and the confidence-bound lock rule."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from steadyrank.serve.tools.golden.plackett_luce import (
    LockGraph,
    confidence_bounds,
    pl_gradient_and_information,
    pl_step,
    topological_order,
)
from steadyrank.serve.tools.golden.refine import RefineSettings, RefineState, observe


def log_likelihood(theta: np.ndarray, ranking: list[int]) -> float:
    total = 0.0
    for j in range(len(ranking) - 1):
        remaining = ranking[j:]
        total += theta[ranking[j]] - np.log(np.exp(theta[remaining]).sum())
    return total


def test_gradient_and_fisher_match_finite_differences():
    rng = np.random.default_rng(3)
    theta = rng.normal(size=8)
    ranking = [5, 1, 7, 2, 0]
    gradient, information = pl_gradient_and_information(theta, ranking)
    h = 1e-5
    for i in range(8):
        e = np.zeros(8)
        e[i] = h
        numeric = (log_likelihood(theta + e, ranking) - log_likelihood(theta - e, ranking)) / (2 * h)
        second = (log_likelihood(theta + e, ranking) - 2 * log_likelihood(theta, ranking)
                  + log_likelihood(theta - e, ranking)) / h**2
        assert abs(gradient[i] - numeric) < 1e-6
        assert abs(information[i] - (-second)) < 1e-4  # the PL Hessian's diagonal is −Fisher
    assert gradient[[3, 4, 6]].tolist() == [0, 0, 0] and information[[3, 4, 6]].tolist() == [0, 0, 0]


def test_step_moves_toward_the_observed_order_and_decays():
    theta = np.zeros(3)
    new, info, exposures = pl_step(theta, np.zeros(3), np.zeros(3, dtype=int), [2, 0, 1], step=1.0, decay=1.0)
    assert new[2] > new[0] > new[1] and exposures.tolist() == [1, 1, 1] and np.all(info > 0)
    later, _, _ = pl_step(theta, info, exposures, [2, 0, 1], step=1.0, decay=1.0)
    assert np.allclose(later - theta, (new - theta) / 2)  # η = η₀ / (1 + decay · 1)


def test_confidence_bounds_shrink_with_information():
    lower, upper = confidence_bounds(np.array([1.0, 1.0]), np.array([0.0, 3.0]), prior_information=1.0, z=2.0)
    assert np.allclose(upper - lower, [4.0, 2.0])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=40),
       st.lists(st.floats(-5, 5), min_size=8, max_size=8))
def test_locks_never_form_a_cycle_and_the_order_respects_them(attempts, theta):
    graph = LockGraph(8)
    for winner, loser in attempts:
        before = list(graph.edges)
        added = graph.add(winner, loser)
        assert added == (graph.edges != before)
        if not added and winner != loser:
            assert graph.reaches(winner, loser) or graph.reaches(loser, winner)
    order = topological_order(np.array(theta), graph)
    assert sorted(order) == list(range(8))  # a full order exists: the graph is acyclic
    position = {item: p for p, item in enumerate(order)}
    assert all(position[win] < position[lose] for win, lose in graph.edges)
    for win, lose in graph.edges:  # acyclic: the loser never reaches the winner
        assert not graph.reaches(lose, win)


def test_order_without_locks_is_by_score():
    assert topological_order(np.array([0.1, 3.0, 2.0]), LockGraph(3)) == [1, 2, 0]
    assert topological_order(np.array([0.1, 3.0, 2.0]), LockGraph(3, [(0, 1)])) == [2, 0, 1]


def test_confidence_bound_rule_locks_only_separated_pairs():
    settings = RefineSettings(confirmations=100, z=1.5, step=0.1, prior_information=1.0, top_k=3)
    state = RefineState.start([4, 2, 3], settings)  # θ ≈ 4, 2, 3; se = 1 at first
    state.information = [50.0, 50.0, 0.0]  # items 0 and 1 are well known, item 2 is not
    new = observe(state, [0, 2, 1], settings)
    locks = {tuple(edge) for edge in new.locks}
    assert (0, 1) in locks  # 4 − 1.5·0.14 > 2 + 1.5·0.14: the bounds separate
    assert (0, 2) not in locks and (2, 1) not in locks  # item 2's interval (se ≈ 0.9) overlaps both


def test_confirmation_rule_locks_after_n_net_wins_and_refuses_cycles():
    settings = RefineSettings(confirmations=2, z=50.0, step=0.01, top_k=3)
    state = RefineState.start([3, 3, 3], settings)
    state = observe(state, [1, 0, 2], settings)
    assert state.locks == []
    state = observe(state, [1, 0, 2], settings)
    assert {tuple(e) for e in state.locks} == {(1, 0), (1, 2), (0, 2)}
    for _ in range(4):  # the reverse preference gathers wins but can never close a cycle
        state = observe(state, [2, 0, 1], settings)
    graph = state.graph()
    assert all(not graph.reaches(lose, win) for win, lose in graph.edges)
    assert state.order() == [1, 0, 2]

"""The Pareto frontier against brute force, and the SLA/budget picks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from steadyrank.serve.tools.clq.frontier import Candidate, pareto_front, pick


def brute_force_front(cost, latency, quality) -> np.ndarray:
    """i is on the frontier iff no j is ≤ in cost and latency, ≥ in quality, and strictly better in one."""
    n = len(cost)
    mask = np.ones(n, dtype=bool)
    for i, j in itertools.product(range(n), range(n)):
        at_least = cost[j] <= cost[i] and latency[j] <= latency[i] and quality[j] >= quality[i]
        strictly = cost[j] < cost[i] or latency[j] < latency[i] or quality[j] > quality[i]
        if at_least and strictly:
            mask[i] = False
    return mask


@pytest.mark.parametrize("seed", range(40))
def test_front_equals_brute_force_with_ties_and_duplicates(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    # few distinct values per axis force ties on single axes and exact duplicate points
    levels = int(rng.integers(2, 6))
    cost, latency, quality = (rng.integers(0, levels, n).astype(float) for _ in range(3))
    if n > 3:
        cost[1], latency[1], quality[1] = cost[0], latency[0], quality[0]  # an exact duplicate
    assert pareto_front(cost, latency, quality).tolist() == brute_force_front(cost, latency, quality).tolist()


def test_front_on_continuous_points() -> None:
    rng = np.random.default_rng(7)
    points = rng.random((200, 3))
    got = pareto_front(points[:, 0], points[:, 1], points[:, 2])
    assert got.tolist() == brute_force_front(points[:, 0], points[:, 1], points[:, 2]).tolist()
    assert 0 < got.sum() < 200


def test_duplicates_of_a_frontier_point_are_all_on_it() -> None:
    assert pareto_front([1, 1, 2], [5, 5, 6], [0.8, 0.8, 0.7]).tolist() == [True, True, False]


def test_nan_is_refused() -> None:
    with pytest.raises(ValueError, match="NaN"):
        pareto_front([1.0], [1.0], [float("nan")])


def _c(name: str, cost: float, latency: float, quality: float, k: float) -> Candidate:
    return Candidate(name, cost, latency, quality, k)


def test_sla_pick_maximises_quality_within_the_bound() -> None:
    cands = [_c("fast", 1, 10, 0.70, 20), _c("mid", 2, 40, 0.75, 50), _c("slow", 3, 90, 0.80, 100)]
    assert pick(cands, max_latency=50)[0].config_id == "mid"
    assert pick(cands, max_latency=100)[0].config_id == "slow"
    assert pick(cands, max_latency=5) == (None, None)
    assert pick(cands, max_cost=1.5)[0].config_id == "fast"


def test_exact_quality_tie_goes_to_smaller_k() -> None:
    cands = [_c("k100", 1, 10, 0.8, 100), _c("k50", 2, 20, 0.8, 50)]
    chosen, best = pick(cands)
    assert chosen.config_id == "k50"
    assert best.config_id == "k50"


def test_difference_within_noise_goes_to_smaller_k() -> None:
    cands = [_c("k100", 1, 10, 0.81, 100), _c("k50", 1, 10, 0.80, 50), _c("k20", 1, 10, 0.60, 20)]
    chosen, best = pick(cands, indistinguishable={("k100", "k50")})
    assert (chosen.config_id, best.config_id) == ("k50", "k100")
    chosen, _ = pick(cands)  # without the noise marking the best wins
    assert chosen.config_id == "k100"

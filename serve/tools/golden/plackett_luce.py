"""Plackett–Luce (PL) math for listwise refinement (pure numpy).

Item i has a log-worth θ_i. A judge's ranking π of a batch S is a PL draw: stage j picks π_j from
the remaining set R_j = {π_j, …, π_|S|} with probability p_{i|R_j} = exp θ_i / Σ_{k∈R_j} exp θ_k.

- log-likelihood ``ℓ(π) = Σ_j [θ_{π_j} − log Σ_{k∈R_j} exp θ_k]`` (stages j = 1…|S|−1);
- gradient ``∂ℓ/∂θ_i = Σ_j ([i = π_j] − p_{i|R_j} [i ∈ R_j])``;
- Fisher information (diagonal) ``I_i = Σ_j p_{i|R_j}(1 − p_{i|R_j}) [i ∈ R_j]``.

The update is a stage-wise gradient ascent step with a per-item decaying step
``η_i = η₀ / (1 + decay · n_i)`` (n_i = times i was judged before). Each item keeps accumulated
information ``I_i`` on top of a prior ``I₀``; its standard error is ``1/√(I₀ + I_i)`` and its
confidence bounds are ``θ_i ± z · se_i`` (log-worth units).

Pairwise locks ``a ≻ b`` form a directed acyclic graph (:class:`LockGraph`): a lock that would close
a cycle is refused. The final order (:func:`topological_order`) is the topological order of that DAG
that, among the items whose predecessors are all placed, always takes the highest θ next (ties:
lower index first), so it respects every lock and otherwise sorts by score. See
docs/ARCHITECTURE.md.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence

import numpy as np


def pl_gradient_and_information(theta: np.ndarray, ranking: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """``(∂ℓ/∂θ, diagonal Fisher information)`` of one observed ranking (item indices, best first)."""
    theta = np.asarray(theta, dtype=np.float64)
    ranking = list(ranking)
    if len(set(ranking)) != len(ranking):
        raise ValueError("a ranking holds the same item twice")
    gradient = np.zeros_like(theta)
    information = np.zeros_like(theta)
    for stage in range(len(ranking) - 1):
        remaining = np.asarray(ranking[stage:])
        logits = theta[remaining]
        p = np.exp(logits - logits.max())
        p /= p.sum()
        gradient[remaining] -= p
        gradient[ranking[stage]] += 1.0
        information[remaining] += p * (1.0 - p)
    return gradient, information


def pl_step(theta: np.ndarray, information: np.ndarray, exposures: np.ndarray, ranking: Sequence[int], *,
            step: float, decay: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One update from ``ranking``: new ``(θ, accumulated information, exposures)`` (inputs untouched).

    ``θ_i += η₀/(1 + decay·n_i) · ∂ℓ/∂θ_i`` for the judged items, ``I_i += Fisher_i``, ``n_i += 1``.
    """
    gradient, fisher = pl_gradient_and_information(theta, ranking)
    rates = step / (1.0 + decay * np.asarray(exposures, dtype=np.float64))
    judged = np.zeros(len(theta), dtype=bool)
    judged[list(ranking)] = True
    new_theta = np.asarray(theta, dtype=np.float64) + np.where(judged, rates * gradient, 0.0)
    return new_theta, np.asarray(information, dtype=np.float64) + fisher, np.asarray(exposures) + judged


def confidence_bounds(theta: np.ndarray, information: np.ndarray, *, prior_information: float,
                      z: float) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)`` = ``θ ∓ z / √(I₀ + I)`` per item."""
    se = 1.0 / np.sqrt(prior_information + np.asarray(information, dtype=np.float64))
    return theta - z * se, theta + z * se


class LockGraph:
    """Pairwise locks ``winner ≻ loser`` over items 0…n−1, kept acyclic."""

    def __init__(self, n: int, locks: Iterable[tuple[int, int]] = ()) -> None:
        self.n = n
        self.successors: list[set[int]] = [set() for _ in range(n)]
        self.edges: list[tuple[int, int]] = []
        for winner, loser in locks:
            if not self.add(winner, loser):
                raise ValueError(f"lock {winner}≻{loser} closes a cycle")

    def reaches(self, source: int, target: int) -> bool:
        """Whether a chain of locks leads from ``source`` to ``target``."""
        stack, seen = [source], {source}
        while stack:
            node = stack.pop()
            if node == target:
                return True
            for nxt in self.successors[node] - seen:
                seen.add(nxt)
                stack.append(nxt)
        return False

    def add(self, winner: int, loser: int) -> bool:
        """Lock ``winner ≻ loser``; False (and nothing changes) if it is already implied or would close a cycle."""
        if winner == loser or self.reaches(winner, loser) or self.reaches(loser, winner):
            return False
        self.successors[winner].add(loser)
        self.edges.append((winner, loser))
        return True


def topological_order(theta: np.ndarray, graph: LockGraph) -> list[int]:
    """Every item once, each lock's winner before its loser, otherwise highest θ first (Kahn + max-heap)."""
    indegree = [0] * graph.n
    for _winner, loser in graph.edges:
        indegree[loser] += 1
    ready = [(-float(theta[i]), i) for i in range(graph.n) if indegree[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, node = heapq.heappop(ready)
        order.append(node)
        for loser in graph.successors[node]:
            indegree[loser] -= 1
            if indegree[loser] == 0:
                heapq.heappush(ready, (-float(theta[loser]), loser))
    return order

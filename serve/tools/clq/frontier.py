"""Exact Pareto frontier over (cost, latency, quality) and bound-constrained picks. Pure numpy.

A configuration ``a`` *dominates* ``b`` when ``cost_a ≤ cost_b``, ``latency_a ≤ latency_b`` and
``quality_a ≥ quality_b`` with at least one strict inequality. The frontier is the set of
configurations that no other dominates; equal points do not dominate each other, so duplicates of
a frontier point are all on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def _as_minimised(cost: Sequence[float], latency: Sequence[float], quality: Sequence[float]) -> np.ndarray:
    """(n, 3) array of objectives to minimise: cost, latency, −quality; refuses NaN and length mismatch."""
    points = np.column_stack([np.asarray(cost, float), np.asarray(latency, float), -np.asarray(quality, float)])
    if np.isnan(points).any():
        raise ValueError("cost, latency and quality must be numbers (got NaN)")
    return points


def pareto_front(cost: Sequence[float], latency: Sequence[float], quality: Sequence[float]) -> np.ndarray:
    """Boolean mask of the configurations on the Pareto frontier.

    Points are visited in lexicographic order of (cost, latency, −quality); a point can only be
    dominated by one visited before it, and if it is dominated at all then it is dominated by a
    frontier point (dominance is transitive), so each point is checked against the frontier found
    so far: O(n · |frontier|).
    """
    points = _as_minimised(cost, latency, quality)
    order = np.lexsort((points[:, 2], points[:, 1], points[:, 0]))
    on_front = np.zeros(len(points), dtype=bool)
    front: list[np.ndarray] = []
    for i in order:
        p = points[i]
        if front:
            kept = np.asarray(front)
            if np.any(np.all(kept <= p, axis=1) & np.any(kept < p, axis=1)):
                continue
        front.append(p)
        on_front[i] = True
    return on_front


@dataclass(frozen=True)
class Candidate:
    """What a pick compares: the objectives, the candidates reranked (K) and an id for stable ties."""

    config_id: str
    cost: float
    latency: float
    quality: float
    k: float


def pick(
    candidates: Sequence[Candidate],
    *,
    max_latency: float | None = None,
    max_cost: float | None = None,
    indistinguishable: set[tuple[str, str]] | None = None,
) -> tuple[Candidate | None, Candidate | None]:
    """``(pick, best)`` among the candidates within the bounds (None, None if none qualifies).

    ``best`` has the highest quality (ties → smaller K, cost, latency, id). The pick is the
    candidate with the smallest K (then cost, latency, id) among those whose quality equals the
    best's or whose pair ``(best.id, other.id)`` is in ``indistinguishable`` (a quality
    difference within its bootstrap CI): a pick is never made on noise.
    """
    feasible = [
        c for c in candidates
        if (max_latency is None or c.latency <= max_latency) and (max_cost is None or c.cost <= max_cost)
    ]
    if not feasible:
        return None, None
    best = min(feasible, key=lambda c: (-c.quality, c.k, c.cost, c.latency, c.config_id))
    same = indistinguishable or set()
    tied = [c for c in feasible if c.quality >= best.quality or (best.config_id, c.config_id) in same]
    chosen = min(tied, key=lambda c: (c.k, c.cost, c.latency, c.config_id))
    return chosen, best

"""The CLQ choice rules beyond the bounded picks: a quality target, the efficiency scalar, the
marginal ΔQ/Δms table along the frontier. Pure: numbers in, numbers out.

- **Quality target** ``Q*``: among the configurations with ``quality ≥ Q*`` (the point estimate
  of the grid's quality measure), the one with the lowest latency (the grid's latency statistic of
  the total), then the lowest cost per query, then the highest end-to-end efficiency, then the
  smallest id. None when no configuration reaches the target.
- **Efficiency** (a tie-breaker only, never a ranking of configurations of different quality):
  average quality divided by a median latency, in quality per second::

      efficiency_local      = Q / (rerank p50 ms / 1000)   (the reranker stage alone)
      efficiency_end_to_end = Q / (total p50 ms / 1000)    (embed + retrieve + rerank)

  None where that median is 0 (nothing was reranked or timed).
- **Marginal table**: the frontier's latency–quality staircase (frontier configurations that no
  other frontier configuration beats on latency and quality alone), sorted by latency; each step
  from the previous one reports ``ΔQ``, ``Δms``, ``ΔQ/Δms`` (quality per millisecond; None when
  ``Δms = 0``) and ``Δcost``. What one more millisecond of budget buys, read down the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from steadyrank.serve.tools.clq.frontier import Candidate, pareto_front

#: The JSON's and the table's reminder of what the efficiency scalar may decide.
EFFICIENCY_NOTE = ("tie-breaker only: quality per second of median latency; it orders configurations "
                   "the rules leave tied, never configurations of different quality")


@dataclass(frozen=True)
class Efficiency:
    """Quality per second of median latency: the reranker stage (``local``) and the whole query (``end_to_end``)."""

    local: float | None
    end_to_end: float | None


def per_second(quality: float, median_ms: float) -> float | None:
    """``quality / (median_ms / 1000)``; None for a median of 0 ms."""
    return None if median_ms <= 0 else quality / (median_ms / 1000.0)


def efficiency(quality: float, rerank_p50_ms: float, total_p50_ms: float) -> Efficiency:
    """Both variants of the module docstring's efficiency scalar."""
    return Efficiency(per_second(quality, rerank_p50_ms), per_second(quality, total_p50_ms))


def quality_target_pick(candidates: Sequence[Candidate], target: float,
                        end_to_end: dict[str, float | None] | None = None) -> Candidate | None:
    """The quality-target rule (module docstring); ``end_to_end`` maps config ids to their
    end-to-end efficiency (the last tie-breaker before the id; missing or None counts as 0)."""
    feasible = [c for c in candidates if c.quality >= target]
    if not feasible:
        return None
    eff = end_to_end or {}
    return min(feasible, key=lambda c: (c.latency, c.cost, -(eff.get(c.config_id) or 0.0), c.config_id))


@dataclass(frozen=True)
class Step:
    """One row of the marginal table: ``config_id`` reached from ``previous`` (None on the first row)."""

    config_id: str
    previous: str | None
    latency: float
    quality: float
    cost: float
    delta_quality: float | None
    delta_ms: float | None
    delta_quality_per_ms: float | None
    delta_cost: float | None


def staircase(frontier: Sequence[Candidate]) -> list[Candidate]:
    """The latency–quality staircase of ``frontier``, by latency then quality (module docstring)."""
    if not frontier:
        return []
    kept = pareto_front([0.0] * len(frontier), [c.latency for c in frontier], [c.quality for c in frontier])
    return sorted((c for c, k in zip(frontier, kept, strict=True) if k),
                  key=lambda c: (c.latency, c.quality, c.cost, c.config_id))


def marginal_table(frontier: Sequence[Candidate]) -> list[Step]:
    """ΔQ, Δms, ΔQ/Δms and Δcost between consecutive configurations of the staircase."""
    steps: list[Step] = []
    previous: Candidate | None = None
    for c in staircase(frontier):
        if previous is None:
            steps.append(Step(c.config_id, None, c.latency, c.quality, c.cost, None, None, None, None))
        else:
            dq, dms = c.quality - previous.quality, c.latency - previous.latency
            steps.append(Step(c.config_id, previous.config_id, c.latency, c.quality, c.cost, dq, dms,
                              dq / dms if dms > 0 else None, c.cost - previous.cost))
        previous = c
    return steps

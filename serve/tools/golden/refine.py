"""Listwise refinement of the top of a judged pool: batch selection, PL updates, locks, stopping.

State lives in :class:`RefineState` (plain lists, JSON round-trip exact) so a build can checkpoint it
after every judge call and resume bit for bit. One round = one listwise judge call on a batch of
``batch_size`` items:

1. **Batch** (:func:`next_batch`): the window is the ``window`` best items of the current order. The
   anchor is the window item with the largest ``se_i / √(1 + n_i)`` (uncertain and rarely shown);
   the batch adds the window items closest to the anchor in θ, preferring rarely shown ones
   (key ``|θ_j − θ_anchor| · √(1 + n_j)``), skipping pairs already locked with the anchor while
   others remain. The judge sees the batch in a seeded shuffle (position bias averages out).
2. **Update** (:func:`observe`): PL gradient step with step decay and Fisher information
   (:mod:`.plackett_luce`); every pair ``a`` above ``b`` in the answer adds one win to ``a`` over
   ``b``. A pair is locked ``a ≻ b`` when ``wins(a,b) − wins(b,a) ≥ confirmations`` or when
   ``θ_a − z·se_a > θ_b + z·se_b``, unless the lock would close a cycle.
3. **Stop**: when the top ``top_k`` of the order is unchanged for ``stable_rounds`` rounds, or after
   ``max_calls`` rounds.

Initial θ is the single-shot grade (1–5) times ``grade_scale`` plus a tiny retrieval tie-break.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from steadyrank.serve.tools.golden.plackett_luce import LockGraph, confidence_bounds, pl_step, topological_order


class RefineSettings(BaseModel):
    """Refinement knobs (the ``refine`` section of the build settings)."""

    model_config = ConfigDict(extra="forbid")

    top_k: int = Field(default=20, ge=1, description="the head of the order whose stability ends refinement")
    window: int = Field(default=30, ge=2, description="items of the current order eligible for listwise batches")
    batch_size: int = Field(default=5, ge=2, description="items per listwise judge call")
    max_calls: int = Field(default=60, ge=0, description="listwise judge calls per query at most")
    stable_rounds: int = Field(default=5, ge=1, description="stop when the top_k order is unchanged for this many rounds")
    step: float = Field(default=1.0, gt=0, description="initial PL step η₀ (log-worth per unit gradient)")
    decay: float = Field(default=0.3, ge=0, description="step decay: η_i = η₀ / (1 + decay · n_i)")
    prior_information: float = Field(default=1.0, gt=0, description="Fisher information I₀ of the grade prior")
    grade_scale: float = Field(default=1.0, gt=0, description="initial log-worth per rubric grade")
    z: float = Field(default=3.0, gt=0, description="confidence-bound width for the bound lock rule")
    confirmations: int = Field(default=5, ge=1, description="net pairwise wins that lock a preference")
    seed: int = Field(default=0, description="seed of the batch presentation shuffle")


@dataclass
class RefineState:
    """Everything refinement needs to resume: items are indices into the pruned pool."""

    theta: list[float]
    information: list[float]
    exposures: list[int]
    wins: list[list[int]]
    theta_initial: list[float] = field(default_factory=list)
    locks: list[list[int]] = field(default_factory=list)
    rounds: int = 0
    stable_for: int = 0
    top: list[int] = field(default_factory=list)
    stability_round: int | None = None
    done: bool = False
    history: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def start(cls, grades: list[int], settings: RefineSettings) -> RefineState:
        """θ_i = grade_scale·grade_i − 1e-6·i (pool order breaks ties), no information, no locks."""
        n = len(grades)
        theta = [settings.grade_scale * g - 1e-6 * i for i, g in enumerate(grades)]
        state = cls(theta=theta, theta_initial=list(theta), information=[0.0] * n, exposures=[0] * n, wins=[[0] * n for _ in range(n)])
        state.top = state.order()[: settings.top_k]
        state.done = n < 2 or settings.max_calls == 0
        return state

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> RefineState:
        return cls(**record)

    def graph(self) -> LockGraph:
        return LockGraph(len(self.theta), ((edge[0], edge[1]) for edge in self.locks))

    def order(self) -> list[int]:
        """The current order: topological over the locks, by θ otherwise."""
        return topological_order(np.asarray(self.theta), self.graph())


def next_batch(state: RefineState, settings: RefineSettings, salt: str) -> list[int]:
    """The next batch, in the (seeded, shuffled) order the judge will see it."""
    theta = np.asarray(state.theta)
    lower, upper = confidence_bounds(theta, np.asarray(state.information),
                                     prior_information=settings.prior_information, z=1.0)
    se = (upper - lower) / 2.0
    exposures = np.asarray(state.exposures, dtype=np.float64)
    window = state.order()[: max(settings.window, settings.batch_size)]
    anchor = max(window, key=lambda i: (se[i] / np.sqrt(1.0 + exposures[i]), -window.index(i)))
    graph = state.graph()
    others = sorted((i for i in window if i != anchor),
                    key=lambda j: (graph.reaches(anchor, j) or graph.reaches(j, anchor),
                                   abs(theta[j] - theta[anchor]) * np.sqrt(1.0 + exposures[j]), j))
    batch = [anchor, *others[: settings.batch_size - 1]]
    random.Random(f"{settings.seed}:{salt}:{state.rounds}").shuffle(batch)
    return batch


def observe(state: RefineState, ranking: list[int], settings: RefineSettings) -> RefineState:
    """Apply one listwise answer (items best first) and advance the round; returns the new state."""
    theta, information, exposures = pl_step(
        np.asarray(state.theta), np.asarray(state.information), np.asarray(state.exposures), ranking,
        step=settings.step, decay=settings.decay,
    )
    wins = [row[:] for row in state.wins]
    for a_pos, a in enumerate(ranking):
        for b in ranking[a_pos + 1:]:
            wins[a][b] += 1
    lower, upper = confidence_bounds(theta, information, prior_information=settings.prior_information, z=settings.z)
    graph = LockGraph(len(theta), ((edge[0], edge[1]) for edge in state.locks))
    new_locks = []
    for a_pos, a in enumerate(ranking):
        for b in ranking[a_pos + 1:]:
            for winner, loser in ((a, b), (b, a)):
                confirmed = wins[winner][loser] - wins[loser][winner] >= settings.confirmations
                if (confirmed or lower[winner] > upper[loser]) and graph.add(winner, loser):
                    new_locks.append([winner, loser])
    new = RefineState(
        theta=[float(x) for x in theta], information=[float(x) for x in information],
        exposures=[int(x) for x in exposures], wins=wins, theta_initial=state.theta_initial, locks=state.locks + new_locks,
        rounds=state.rounds + 1, stable_for=state.stable_for, top=state.top,
        stability_round=state.stability_round, history=state.history,
    )
    top = new.order()[: settings.top_k]
    new.stable_for = new.stable_for + 1 if top == state.top else 0
    new.top = top
    if new.stable_for >= settings.stable_rounds and new.stability_round is None:
        new.stability_round = new.rounds
    new.done = new.stable_for >= settings.stable_rounds or new.rounds >= settings.max_calls
    new.history = state.history + [{"round": new.rounds, "ranking": list(ranking), "new_locks": new_locks}]
    return new


def run_refinement(state: RefineState, settings: RefineSettings, salt: str,
                   rank_batch: Callable[[list[int]], list[int]],
                   on_round: Callable[[RefineState], None] = lambda state: None) -> RefineState:
    """Rounds until done: ``rank_batch(batch)`` is the judge's answer (items best first);
    ``on_round(new_state)`` runs after every update (checkpoint there)."""
    while not state.done:
        state = observe(state, rank_batch(next_batch(state, settings, salt)), settings)
        on_round(state)
    return state

"""A simulated judge with known true utilities, for the benchmark and the tests (no LLM runs here).

Each document d has a true utility u_d (log-worth). A listwise answer is a Plackett–Luce draw with
worths ``exp(u_d / temperature)`` (temperature = the judge's noise); a single-shot grade is
``clip(round(u_d + N(0, grade_noise)), 1, 5)``. Draws are seeded from (seed, call number, query,
passages), so a run in one process is reproducible.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from steadyrank.serve.server.quality.kendall import kendall_tau_b
from steadyrank.serve.tools.golden.judges import Judge, JudgeCall, Passage, prompt_hash


class SimulatedPLJudge(Judge):
    def __init__(self, utilities: Mapping[str, float], *, temperature: float = 1.0, grade_noise: float = 0.7,
                 seed: int = 0) -> None:
        self.utilities, self.temperature, self.grade_noise, self.seed = dict(utilities), temperature, grade_noise, seed
        self.calls = 0

    def _rng(self, *parts: object) -> np.random.Generator:
        digest = hashlib.sha256(repr((self.seed, self.calls, *parts)).encode()).digest()
        return np.random.default_rng(int.from_bytes(digest[:8], "little"))

    def check(self) -> None:
        """Always answers."""

    def grade(self, query: str, passages: Sequence[Passage]) -> Iterator[JudgeCall]:
        for doc, _ in passages:
            self.calls += 1
            noisy = self.utilities[doc] + self._rng(query, doc).normal(0.0, self.grade_noise)
            yield JudgeCall("grade", [doc], prompt_hash([query, doc]), {"grades": {doc: int(np.clip(np.rint(noisy), 1, 5))}})

    def rank(self, query: str, passages: Sequence[Passage]) -> JudgeCall:
        self.calls += 1
        ids = [doc for doc, _ in passages]
        log_worth = np.array([self.utilities[d] for d in ids]) / self.temperature
        rng = self._rng(query, *ids)
        # A PL draw: Gumbel-perturbed log-worths sorted descending (equivalent to sequential sampling).
        keys = log_worth + rng.gumbel(size=len(ids))
        return JudgeCall("rank", ids, prompt_hash([query, ids]), {"ranking": [ids[i] for i in np.argsort(-keys)]})


def kendall_tau_to_truth(order: Sequence[int], utilities: np.ndarray) -> float:
    """Kendall τ-b between an order (best first) and the true utilities."""

    positions = np.empty(len(order))
    positions[list(order)] = np.arange(len(order))
    return kendall_tau_b(-positions, utilities)


def simulate_query(n_items: int, settings: Any, *, seed: int, temperature: float = 1.0,
                   grade_noise: float = 0.7) -> dict[str, Any]:
    """One simulated query: true utilities ~ U(1, 5), single-shot grades, then refinement rounds.

    Returns Kendall τ-b to the truth of: the single-shot grades (``n_items`` grade calls); grades
    averaged over repeated grading at the same total number of calls as refinement
    (``repeated_grades``, the equal-budget peer; ``repeated_curve``: ``[(grade calls, τ)]`` per pass);
    the refined order after every round
    (``curve``: ``[(judge calls, τ)]``, grade calls included).
    """
    from steadyrank.serve.tools.golden.refine import RefineState, run_refinement

    rng = np.random.default_rng(seed)
    utilities = rng.uniform(1.0, 5.0, size=n_items)
    docs = [f"d{i}" for i in range(n_items)]
    judge = SimulatedPLJudge(dict(zip(docs, utilities, strict=False)), temperature=temperature, grade_noise=grade_noise, seed=seed)
    grades = [next(iter(call.answer["grades"].values())) for call in judge.grade("q", [(d, "") for d in docs])]
    state = RefineState.start(grades, settings)
    curve = [(n_items, kendall_tau_to_truth(state.order(), utilities))]

    def rank_batch(batch: list[int]) -> list[int]:
        ranking = judge.rank("q", [(docs[i], "") for i in batch]).answer["ranking"]
        return [int(d[1:]) for d in ranking]

    def on_round(new: RefineState) -> None:
        curve.append((n_items + new.rounds, kendall_tau_to_truth(new.order(), utilities)))

    final = run_refinement(state, settings, f"sim-{seed}", rank_batch, on_round)
    total_calls = n_items + final.rounds
    passes = [grades] + [[next(iter(c.answer["grades"].values())) for c in judge.grade(f"q{r}", [(d, "") for d in docs])]
                         for r in range(1, max(1, total_calls // n_items))]
    repeated = [(r * n_items, kendall_tau_b(np.mean(passes[:r], axis=0), utilities))
                for r in range(1, len(passes) + 1)]
    return {
        "single_shot": repeated[0][1],
        "repeated_grades": repeated[-1][1],
        "repeated_curve": repeated,
        "refined": curve[-1][1],
        "judge_calls": total_calls,
        "curve": curve,
        "locks": len(final.locks),
        "stability_round": final.stability_round,
    }

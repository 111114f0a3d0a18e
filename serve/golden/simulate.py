"""A simulated judge with known true utilities, for the benchmark and the tests (no LLM runs here).

Each document d has a true utility u_d (log-worth). A listwise answer is a Plackett–Luce draw with
worths ``exp(u_d / temperature)`` (temperature = the judge's noise); a single-shot grade is
``clip(round(u_d + N(0, grade_noise)), 1, 5)``. Draws are seeded from (seed, call number, query,
passages), so a run in one process is reproducible.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from steadyrank.serve.golden.judges import Judge, JudgeCall, Passage, prompt_hash


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
        worth = np.exp(np.array([self.utilities[d] for d in ids]) / self.temperature)
        rng = self._rng(query, *ids)
        # A PL draw: Gumbel-perturbed log-worths sorted descending (equivalent to sequential sampling).
        keys = np.log(worth) + rng.gumbel(size=len(ids))
        return JudgeCall("rank", ids, prompt_hash([query, ids]), {"ranking": [ids[i] for i in np.argsort(-keys)]})

"""The ``reranker`` judge: FP32 scores of a runtime-loaded model mapped to rubric grades by thresholds.

Grades: ``grade(s) = 1 + #{t ∈ thresholds : s ≥ t}`` on the FP32 score s (HPS: logits or embeddings
upcast before φ). Listwise: the batch sorted by score, best first (equal scores keep batch order).
One ``grade`` call scores all passages of a query in one batched pass. The judge is deterministic, so
scores are cached per (query, passage): a listwise call on passages graded before costs no forward pass.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from steadyrank.serve.tools.golden.judges import Judge, JudgeCall, Passage, RerankerJudgeSettings, prompt_hash


class RerankerJudge(Judge):
    def __init__(self, settings: RerankerJudgeSettings) -> None:
        from steadyrank.serve.runtime import ModelSettings, load_scorer

        self.settings = settings
        path = None if settings.model == "bundled" else settings.model
        self.scorer = load_scorer(ModelSettings(path=path, precision=settings.precision))
        self._cache: dict[tuple[str, str], float] = {}

    def check(self) -> None:
        """A loaded model always answers."""

    def _scores(self, query: str, passages: Sequence[Passage]) -> tuple[np.ndarray, str]:
        missing = list(dict.fromkeys(text for _, text in passages if (query, text) not in self._cache))
        if missing:
            fresh = self.scorer.score_pairs([(query, text) for text in missing])[0]
            self._cache.update({(query, text): float(np.float32(s)) for text, s in zip(missing, fresh, strict=True)})
        scores = np.array([self._cache[(query, text)] for _, text in passages], dtype=np.float32)
        digest = prompt_hash({"model": self.scorer.model_id, "precision": self.settings.precision,
                              "query": query, "passages": [text for _, text in passages]})
        return scores, digest

    def grade(self, query: str, passages: Sequence[Passage]) -> Iterator[JudgeCall]:
        scores, digest = self._scores(query, passages)
        grades = 1 + np.searchsorted(np.asarray(self.settings.thresholds, dtype=np.float32), scores, side="right")
        ids = [doc for doc, _ in passages]
        yield JudgeCall("grade", ids, digest, {
            "grades": {d: int(g) for d, g in zip(ids, grades, strict=True)},
            "scores": {d: float(s) for d, s in zip(ids, scores, strict=True)},
        })

    def rank(self, query: str, passages: Sequence[Passage]) -> JudgeCall:
        scores, digest = self._scores(query, passages)
        ids = [doc for doc, _ in passages]
        order = np.argsort(-scores, kind="stable")
        return JudgeCall("rank", ids, digest, {"ranking": [ids[i] for i in order],
                                               "scores": {d: float(s) for d, s in zip(ids, scores, strict=True)}})

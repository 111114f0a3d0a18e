"""Pruning a graded pool: keep every useful candidate (grade ≥ 3), a floor of grade-1/2 ones, a cap.

Candidates are ordered by grade (highest first), then by pool order. All grade ≥ 3 candidates are
kept, plus the first ``negatives`` candidates of grade 1–2 (hard negatives: the judged non-relevant
passages the metrics' Harm and RA-nWG need); the result is cut to ``max_pool``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field


class PruneSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    negatives: int = Field(default=5, ge=0, description="grade-1/2 candidates kept per query (floor of judged negatives)")
    max_pool: int = Field(default=40, ge=1, description="candidates kept per query at most")


def prune(pool_order: Sequence[str], grades: Mapping[str, int], settings: PruneSettings) -> list[str]:
    """The kept doc ids, by grade then pool order."""
    ranked = sorted(pool_order, key=lambda d: (-grades[d], pool_order.index(d)))
    useful = [d for d in ranked if grades[d] >= 3]
    negatives = [d for d in ranked if grades[d] <= 2][: settings.negatives]
    return (useful + negatives)[: settings.max_pool]

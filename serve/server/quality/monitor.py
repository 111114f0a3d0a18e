"""Golden evaluations and their sliding windows: per-query tie-aware metrics, per-variant means.

Each evaluation scores one served ranking (the full reranked candidate list, in the order the
user saw it, with its exact scores) against a golden query's judgments with ``metrics.evaluate``:
the tie-oblivious value is therefore what the user got, and expected/min/max say how much of it
was decided by ties.

A window holds, per variant, the latest evaluation of each of the last ``size`` *distinct* golden
queries evaluated: a query evaluated again (a repeat, by replay or mirror) replaces its own entry and
moves it to the newest end, it never adds a second one. So every golden query weighs the same in the
window's means however often it is searched, and one client repeating one golden query moves the
window by that one query (issue 36). Each entry also keeps the query's latest *replay*, which the
canary comparison pairs on (:mod:`.canary`), and how many evaluations it absorbed.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from steadyrank.metrics import evaluate, parse_measures, straddling_group
from steadyrank.serve.server.quality.golden_sets import RELEVANCE_TO_RUBRIC, GoldenQuery

#: What the evaluator measures on every golden query.
GOLDEN_MEASURES = ("ndcg@10", "mrr@10", "map@10", "recall@30", "ra_nwg@10", "ra_nwg@30",
                   "nrecall4@10", "nrecall4@30", "harm@10")
#: Statistics exported per measure (``steadyrank_golden_quality{stat=...}``).
QUALITY_STATS = ("expected", "min", "max", "range", "bias", "oblivious")
TIE_CUTOFF = 10


@dataclass(frozen=True)
class GoldenEvaluation:
    """One served ranking of a golden query, evaluated."""

    query_id: str
    variant: str
    source: str  # "replay" | "mirror"
    stats: dict[str, dict[str, float]]  # measure → stat (QUALITY_STATS + proc, proc_ratio) → value (NaN = NA)
    tie_at_cutoff: bool  # a tie group straddles rank TIE_CUTOFF
    tie_group_size: int  # size of that group (0 when none)
    escalated: bool
    k: int  # candidates reranked
    latency_s: float
    timestamp: float = field(default_factory=time.time)


def evaluate_ranking(
    golden: GoldenQuery,
    candidates: Sequence[tuple[str, float]],
    *,
    variant: str,
    source: str,
    escalated: bool = False,
    latency_s: float = 0.0,
    measures: Sequence[str] = GOLDEN_MEASURES,
) -> GoldenEvaluation:
    """Evaluate ``candidates`` (doc id, score) in served order against ``golden`` on ``measures``."""
    ids = [doc for doc, _ in candidates]
    if len(set(ids)) != len(ids):
        raise ValueError(f"golden query {golden.query_id}: duplicate document ids in the served ranking")
    if not ids:
        raise ValueError(f"golden query {golden.query_id}: the served ranking is empty")
    scores = np.array([score for _, score in candidates], dtype=np.float64)
    result = evaluate(
        {golden.query_id: dict(zip(ids, scores.tolist(), strict=False))}, {golden.query_id: golden.relevance},
        measures, rel_level=1, gmax=3, rubric_map=RELEVANCE_TO_RUBRIC,
    )
    stats = {}
    for name, per_query in result.per_query[golden.query_id].items():
        stats[name] = {stat: (np.nan if value is None else value) for stat, value in per_query.items()}
    group = straddling_group(scores, TIE_CUTOFF) if len(ids) > TIE_CUTOFF else None
    return GoldenEvaluation(
        golden.query_id, variant, source, stats, group is not None, 0 if group is None else int(group.size),
        escalated, len(ids), latency_s,
    )


@dataclass(frozen=True)
class WindowSummary:
    """Means over one variant's window (NaN where no evaluation defines the value)."""

    variant: str
    n: int
    quality: dict[str, dict[str, float]]  # measure → QUALITY_STATS + proc + proc_ratio → mean
    tie_at_cutoff_rate: float
    mean_tie_group_size: float
    escalation_rate: float
    mean_k: float
    latency_p50_s: float
    latency_p95_s: float


def _mean(values: Iterable[float]) -> float:
    array = np.asarray(list(values), dtype=np.float64)
    defined = array[~np.isnan(array)]
    return float(defined.mean()) if defined.size else float("nan")


#: Where an evaluation came from: a scheduled golden replay, or a mirrored user search.
SOURCES = ("replay", "mirror")


@dataclass(frozen=True)
class WindowEntry:
    """One golden query in a window: its ``latest`` evaluation (any source), its latest ``replay``
    (None until it was replayed), and the ``evaluations`` it absorbed since it entered the window."""

    latest: GoldenEvaluation
    replay: GoldenEvaluation | None
    evaluations: int


class QualityWindow:
    """Per variant, the latest evaluation of each of the last ``size`` distinct golden queries
    (module docstring): a repeat refreshes its query's entry, the least recently evaluated query
    leaves first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._windows: dict[str, OrderedDict[str, WindowEntry]] = {}

    def add(self, evaluation: GoldenEvaluation) -> None:
        window = self._windows.setdefault(evaluation.variant, OrderedDict())
        previous = window.pop(evaluation.query_id, None)
        replay = evaluation if evaluation.source == "replay" else None if previous is None else previous.replay
        window[evaluation.query_id] = WindowEntry(evaluation, replay, 1 if previous is None else previous.evaluations + 1)
        while len(window) > self.size:
            window.popitem(last=False)

    def variants(self) -> list[str]:
        return sorted(self._windows)

    def evaluations(self, variant: str) -> list[GoldenEvaluation]:
        """The latest evaluation of each query in ``variant``'s window, least recently evaluated first."""
        return [entry.latest for entry in self._windows.get(variant, {}).values()]

    def replays(self, variant: str) -> list[GoldenEvaluation]:
        """The latest replay of each query in ``variant``'s window that has one (the canary's pairs)."""
        return [entry.replay for entry in self._windows.get(variant, {}).values() if entry.replay is not None]

    def composition(self, variant: str) -> dict[str, Any]:
        """What ``variant``'s window holds: ``queries`` (distinct golden queries), ``evaluations``
        (absorbed by their entries), ``repeats_refreshed`` (= evaluations − queries: repeats that
        replaced an entry instead of adding one), ``by_source`` (queries whose latest evaluation is a
        replay or a mirror) and ``replayed`` (queries with a replay, the canary's pairs)."""
        entries = list(self._windows.get(variant, {}).values())
        absorbed = sum(e.evaluations for e in entries)
        return {"queries": len(entries), "evaluations": absorbed, "repeats_refreshed": absorbed - len(entries),
                "by_source": {source: sum(e.latest.source == source for e in entries) for source in SOURCES},
                "replayed": sum(e.replay is not None for e in entries)}

    def summary(self, variant: str) -> WindowSummary:
        window = self.evaluations(variant)
        stats = QUALITY_STATS + ("proc", "proc_ratio")
        quality = {
            str(m): {s: _mean(e.stats[str(m)][s] for e in window) for s in stats}
            for m in parse_measures(list(GOLDEN_MEASURES))
        }
        latencies = np.array([e.latency_s for e in window]) if window else np.array([np.nan])
        return WindowSummary(
            variant, len(window), quality,
            _mean(float(e.tie_at_cutoff) for e in window),
            _mean(float(e.tie_group_size) for e in window if e.tie_at_cutoff),
            _mean(float(e.escalated) for e in window),
            _mean(float(e.k) for e in window),
            float(np.percentile(latencies, 50)), float(np.percentile(latencies, 95)),
        )

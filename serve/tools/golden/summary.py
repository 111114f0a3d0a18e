"""Per-query audit records and the build summary.

The audit record of a query holds its pool with provenance, every judge call (prompt hash, answer,
tokens, attempts), per-candidate grade and refinement history (initial and final θ, exposures,
Fisher information), the locks, the listwise rounds and the refined order. The summary aggregates
them: grade distribution, pool sizes, judge calls, tokens, locks, stability rounds and Kendall τ-b
between the single-shot grades and the refined order (scipy ``kendalltau``, variant b, tie-aware;
NaN when all grades are equal).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from steadyrank.serve.server.quality.kendall import kendall_tau_b
from steadyrank.serve.tools.golden.refine import RefineState


def grades_vs_order_tau(grades: Sequence[int], order_positions: Sequence[int]) -> float:
    """Kendall τ-b between grades (higher = better) and positions in an order (lower = better)."""
    if len(grades) < 2:
        return math.nan
    return kendall_tau_b(np.asarray(grades, dtype=float), -np.asarray(order_positions, dtype=float))


def query_record(state: dict[str, Any]) -> dict[str, Any]:
    """The audit record of one finished query state."""
    kept: list[str] = state["kept"]
    refine = RefineState.from_json(state["refine"])
    order = refine.order()
    refined = [kept[i] for i in order]
    position = {doc: rank for rank, doc in enumerate(refined)}
    grades = {d: int(state["grades"][d]) for d in refined}
    pool_order = [p["doc_id"] for p in state["pool"]]
    grade_calls = sorted(state["grade_calls"], key=lambda c: pool_order.index(c["doc_ids"][0]))
    calls = grade_calls + state["rank_calls"]
    return {
        "query_id": state["query_id"],
        "query": state["query"],
        "pool": [{**p, "grade": state["grades"][p["doc_id"]], "kept": p["doc_id"] in position} for p in state["pool"]],
        "judgments": grades,
        "refined_order": refined,
        "candidates": {kept[i]: {"grade": grades[kept[i]], "theta_initial": refine.theta_initial[i], "theta": refine.theta[i],
                                 "exposures": refine.exposures[i], "information": refine.information[i]}
                       for i in range(len(kept))},
        "locks": [[kept[win], kept[lose]] for win, lose in refine.locks],
        "rounds": [{"round": h["round"], "ranking": [kept[i] for i in h["ranking"]],
                    "new_locks": [[kept[win], kept[lose]] for win, lose in h["new_locks"]]} for h in refine.history],
        "judge_calls": calls,
        "tokens": {"prompt": sum(c["prompt_tokens"] for c in calls),
                   "completion": sum(c["completion_tokens"] for c in calls)},
        "n_rounds": refine.rounds,
        "stability_round": refine.stability_round,
        "kendall_tau_b": grades_vs_order_tau([grades[d] for d in refined], [position[d] for d in refined]),
    }


def _stats(values: Sequence[float]) -> dict[str, float]:
    finite = [v for v in values if v is not None and not math.isnan(v)]
    if not finite:
        return {"mean": math.nan, "min": math.nan, "max": math.nan, "n": 0}
    return {"mean": float(np.mean(finite)), "min": float(min(finite)), "max": float(max(finite)), "n": len(finite)}


def summarise(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The build summary over every query's audit record."""
    grades = Counter(g for r in records for g in r["judgments"].values())
    calls = Counter(c["kind"] for r in records for c in r["judge_calls"])
    return {
        "queries": len(records),
        "queries_without_candidates": [r["query_id"] for r in records if not r["judgments"]],
        "grade_distribution": {str(g): grades.get(g, 0) for g in range(1, 6)},
        "pool_size": _stats([len(r["pool"]) for r in records]),
        "kept": _stats([len(r["judgments"]) for r in records]),
        "judge_calls": {"grade": calls.get("grade", 0), "rank": calls.get("rank", 0), "total": sum(calls.values()),
                        "attempts": sum(c["attempts"] for r in records for c in r["judge_calls"])},
        "tokens": {"prompt": sum(r["tokens"]["prompt"] for r in records),
                   "completion": sum(r["tokens"]["completion"] for r in records)},
        "locks": {"total": sum(len(r["locks"]) for r in records), "per_query": _stats([len(r["locks"]) for r in records])},
        "rounds": _stats([r["n_rounds"] for r in records]),
        "stabilised_queries": sum(r["stability_round"] is not None for r in records),
        "stability_round": _stats([r["stability_round"] for r in records if r["stability_round"] is not None]),
        "kendall_tau_b_grades_vs_refined": _stats([r["kendall_tau_b"] for r in records]),
    }

"""Agreement of a built golden set with existing qrels (tie-aware).

Per query judged in both, over the documents judged in both:

- ``kendall_tau_b``: Kendall τ-b between the golden rubric grades and the qrels grades (scipy,
  tie-corrected; NaN when either side is constant);
- ``graded_agreement``: share of documents whose golden relevance ``max(0, rubric − 2)`` equals the
  qrels grade; ``binary_agreement``: the same for relevant (≥ 1) vs not;
- ``ra_nwg@k``: RA-nWG@k (``steadyrank.metrics``, expectation over tie orders) of the qrels' ideal
  order — the qrels documents sorted by qrels grade, equal grades tied — scored with the golden
  grades as the judgments; 1 means the qrels' best documents are the golden set's best;
- ``coverage``: share of the qrels' relevant documents (grade ≥ 1) that the golden pool judged.

Means are macro averages over queries where the value is defined.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from steadyrank.metrics import evaluate
from steadyrank.serve.server.quality.kendall import kendall_tau_b

Qrels = Mapping[str, Mapping[str, float]]


def _tau_b(a: list[float], b: list[float]) -> float:
    if len(a) < 2 or len(set(a)) < 2 or len(set(b)) < 2:
        return math.nan
    return kendall_tau_b(a, b)


def _defined(value: float | None) -> float:
    return math.nan if value is None else float(value)


def qrels_agreement(golden: Mapping[str, Mapping[str, int]], qrels: Qrels, *, k: int = 10,
                    qrels_rubric: bool = False) -> dict[str, Any]:
    """Agreement of golden judgments ``{qid: {doc: rubric}}`` with ``qrels`` ``{qid: {doc: grade}}``
    (relevance grades 0–3, or the 1–5 rubric with ``qrels_rubric``, then mapped like the golden grades)."""
    if qrels_rubric:
        qrels = {q: {d: max(0.0, float(g) - 2) for d, g in docs.items()} for q, docs in qrels.items()}
    shared = [q for q in golden if q in qrels]
    if not shared:
        raise ValueError("the golden set and the qrels share no query id")
    ideal_runs = {q: {d: float(g) for d, g in qrels[q].items()} for q in shared}
    ra = evaluate(ideal_runs, {q: dict(golden[q]) for q in shared}, [f"ra_nwg@{k}"]).per_query
    per_query: dict[str, dict[str, float]] = {}
    for q in shared:
        common = [d for d in golden[q] if d in qrels[q]]
        g = [float(max(0, golden[q][d] - 2)) for d in common]
        t = [float(qrels[q][d]) for d in common]
        relevant = [d for d, grade in qrels[q].items() if grade >= 1]
        per_query[q] = {
            "judged_in_both": len(common),
            "kendall_tau_b": _tau_b(g, t),
            "graded_agreement": float(np.mean([x == y for x, y in zip(g, t, strict=False)])) if common else math.nan,
            "binary_agreement": float(np.mean([(x >= 1) == (y >= 1) for x, y in zip(g, t, strict=False)])) if common else math.nan,
            f"ra_nwg@{k}": _defined(ra.get(q, {}).get(f"ra_nwg@{k}", {}).get("expected")),
            "coverage": len([d for d in relevant if d in golden[q]]) / len(relevant) if relevant else math.nan,
        }
    keys = ["kendall_tau_b", "graded_agreement", "binary_agreement", f"ra_nwg@{k}", "coverage"]
    means = {}
    for key in keys:
        values = [v[key] for v in per_query.values() if not math.isnan(v[key])]
        means[key] = {"mean": float(np.mean(values)) if values else math.nan, "queries": len(values)}
    return {"queries": len(shared), "judged_in_both": sum(v["judged_in_both"] for v in per_query.values()),
            "mean": means, "per_query": per_query}

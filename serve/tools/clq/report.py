"""From measured configurations to a decision: cost model, Pareto frontier, picks, noise marking.

Cost per query (currency of the grid's prices)::

    cost = pair_tokens_reranked / 1000 · rerank_per_1k_tokens
         + generator_prompt_tokens / 1000 · generator_per_1k_tokens
         + (index_bytes / 2^30 · index_per_gib_month + build_seconds / 3600 · build_per_hour) / queries_per_month

Quality is the expected value of the grid's quality measure; latency its latency statistic of the
total (retrieval + rerank). A quality difference is *within noise* when the paired bootstrap CI
(resampling queries, ``metrics.paired_bootstrap``) of the per-query difference, widened by
``SAME_QUALITY_TOLERANCE`` (1e-9) on each side for float rounding, contains 0. The
quality-target rule, the efficiency scalar and the marginal table: :mod:`.rules`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from steadyrank.metrics.aggregate import bootstrap_ci, paired_bootstrap
from steadyrank.serve.tools.clq.frontier import Candidate, pareto_front, pick
from steadyrank.serve.tools.clq.grid import Grid, Prices
from steadyrank.serve.tools.clq.rules import EFFICIENCY_NOTE, efficiency, marginal_table, quality_target_pick

GIB = float(1 << 30)


def cost_per_query(cost: dict[str, float], prices: Prices) -> float:
    """The cost formula of the module docstring."""
    per_month = cost["index_bytes"] / GIB * prices.index_per_gib_month + cost["build_seconds"] / 3600 * prices.build_per_hour
    return (cost["pair_tokens_reranked"] / 1000 * prices.rerank_per_1k_tokens
            + cost["generator_prompt_tokens"] / 1000 * prices.generator_per_1k_tokens
            + per_month / prices.queries_per_month)


def candidates_of(results: Sequence[dict[str, Any]], grid: Grid) -> list[Candidate]:
    return [
        Candidate(r["config_id"], cost_per_query(r["cost"], grid.prices), r["latency"]["total"][grid.latency_stat],
                  r["quality"][grid.quality]["expected"], r["cost"]["candidates_reranked"])
        for r in results
    ]


#: Per-query quality differences this small are float rounding, not a change (metric values are
#: sums of a few dozen float64 gains: their rounding is ~1e-16; no real difference is below 1e-9).
SAME_QUALITY_TOLERANCE = 1e-9


def versus(best: dict[str, Any], other: dict[str, Any], grid: Grid) -> dict[str, Any]:
    """Paired bootstrap of ``other − best`` over the queries both evaluated. ``within_noise``: the CI
    widened by :data:`SAME_QUALITY_TOLERANCE` on each side contains 0, so two configurations whose
    per-query values differ only by float rounding are the same, not a change."""
    qids = sorted(set(best["per_query"]) & set(other["per_query"]))
    ci = paired_bootstrap([best["per_query"][q] for q in qids], [other["per_query"][q] for q in qids],
                          n_resamples=grid.bootstrap_resamples, confidence=grid.confidence)
    return {"diff": ci.estimate, "ci_low": ci.low, "ci_high": ci.high,
            "within_noise": bool(ci.low - SAME_QUALITY_TOLERANCE <= 0 <= ci.high + SAME_QUALITY_TOLERANCE)}


def target_pick(target: float, cands: Sequence[Candidate], by_id: dict[str, dict[str, Any]], grid: Grid,
                end_to_end: dict[str, float | None]) -> dict[str, Any]:
    """The quality-target rule's pick for ``target`` and the bootstrap CI of its mean quality over
    queries (``ci_low < target``: the target is met by the point estimate, not beyond noise)."""
    chosen = quality_target_pick(cands, target, end_to_end)
    out: dict[str, Any] = {"quality_target": target, "pick": chosen and chosen.config_id,
                           "feasible": sum(c.quality >= target for c in cands)}
    if chosen is not None:
        ci = bootstrap_ci(list(by_id[chosen.config_id]["per_query"].values()),
                          n_resamples=grid.bootstrap_resamples, confidence=grid.confidence)
        out |= {"quality": chosen.quality, "latency_ms": chosen.latency, "cost_per_query": chosen.cost,
                "ci_low": ci.low, "ci_high": ci.high, "target_within_noise": bool(ci.low < target)}
    return out


def marginal(cands: Sequence[Candidate], front: Any, by_id: dict[str, dict[str, Any]], grid: Grid) -> list[dict[str, Any]]:
    """The marginal ΔQ/Δms table along the frontier, each step with its paired bootstrap test."""
    rows = []
    for step in marginal_table([c for c, f in zip(cands, front, strict=True) if f]):
        row = dict(step.__dict__)
        if step.previous is not None:
            row["within_noise"] = versus(by_id[step.previous], by_id[step.config_id], grid)["within_noise"]
        rows.append(row)
    return rows


def decide(results: Sequence[dict[str, Any]], grid: Grid) -> dict[str, Any]:
    """Costs, frontier membership, comparison with the best configuration, SLA, budget and
    quality-target picks, the efficiency scalar and the marginal ΔQ/Δms table."""
    by_id = {r["config_id"]: r for r in results}
    cands = candidates_of(results, grid)
    front = pareto_front([c.cost for c in cands], [c.latency for c in cands], [c.quality for c in cands])
    _, best = pick(cands)
    if best is None:
        raise ValueError("no configuration results to decide between")
    rows = []
    for c, on_front in zip(cands, front, strict=True):
        latency = by_id[c.config_id]["latency"]
        eff = efficiency(c.quality, latency["rerank"]["p50_ms"], latency["total"]["p50_ms"])
        rows.append({"config_id": c.config_id, "cost_per_query": c.cost, "latency_ms": c.latency,
                     "quality": c.quality, "k": c.k, "frontier": bool(on_front),
                     "efficiency": {"local": eff.local, "end_to_end": eff.end_to_end},
                     "vs_best": versus(by_id[best.config_id], by_id[c.config_id], grid)})
    end_to_end = {r["config_id"]: r["efficiency"]["end_to_end"] for r in rows}

    def bounded(**bound: float) -> dict[str, Any]:
        feasible = [c for c in cands if all(getattr(c, {"max_latency": "latency", "max_cost": "cost"}[k]) <= v
                                            for k, v in bound.items())]
        _, top = pick(feasible)
        noise = {(top.config_id, c.config_id) for c in feasible
                 if versus(by_id[top.config_id], by_id[c.config_id], grid)["within_noise"]} if top else set()
        chosen, top = pick(feasible, indistinguishable=noise)
        return {**{k: v for k, v in bound.items()}, "pick": chosen and chosen.config_id,
                "best_quality": top and top.config_id, "feasible": len(feasible),
                "within_noise_of_best": sorted(other for _, other in noise)}

    return {
        "configurations": rows,
        "frontier": [c.config_id for c, f in zip(cands, front, strict=True) if f],
        "best": best.config_id,
        "sla_picks": [bounded(max_latency=v) for v in grid.sla_ms],
        "budget_picks": [bounded(max_cost=v) for v in grid.budgets],
        "quality_target_picks": [target_pick(t, cands, by_id, grid, end_to_end) for t in grid.quality_targets],
        "efficiency_note": EFFICIENCY_NOTE,
        "marginal": marginal(cands, front, by_id, grid),
    }


def table_rows(results: Sequence[dict[str, Any]], decision: dict[str, Any], grid: Grid) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows of the summary table (one row per configuration)."""
    q = grid.quality
    headers = ["configuration", "RA-nWG@10", "RA-nWG@30", "range@30", "nDCG@10", "NR4+@30", f"%PROC {q}", "K",
               "tokens", "total p50", "total p95", "rerank p95", "cost/query", "eff local", "eff e2e", "front", "vs best"]
    rows = []
    for r, d in zip(results, decision["configurations"], strict=True):
        qual, lat = r["quality"], r["latency"]
        vs = d["vs_best"]
        mark = "best" if d["config_id"] == decision["best"] else ("≈ (noise)" if vs["within_noise"] else f"{vs['diff']:+.4f}")
        rows.append([r["config_id"], qual["ra_nwg@10"]["expected"], qual["ra_nwg@30"]["expected"],
                     qual["ra_nwg@30"]["range"], qual["ndcg@10"]["expected"], qual["nrecall4@30"]["expected"],
                     qual["proc_ratio"], f"{r['cost']['candidates_reranked']:.1f}",
                     f"{r['cost']['pair_tokens_reranked']:.0f}", f"{lat['total']['p50_ms']:.1f}",
                     f"{lat['total']['p95_ms']:.1f}", f"{lat['rerank']['p95_ms']:.1f}",
                     f"{d['cost_per_query']:.6f}", _number(d["efficiency"]["local"], ".2f"),
                     _number(d["efficiency"]["end_to_end"], ".2f"), "*" if d["frontier"] else "", mark])
    return headers, rows


def _number(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def marginal_rows(decision: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows of the marginal table (one row per staircase step)."""
    headers = ["frontier step", "latency ms", "quality", "ΔQ", "Δms", "ΔQ/Δms", "Δcost", "ΔQ within noise"]
    rows = []
    for s in decision["marginal"]:
        first = s["previous"] is None
        rows.append([s["config_id"], f"{s['latency']:.1f}", f"{s['quality']:.4f}",
                     "" if first else f"{s['delta_quality']:+.4f}", "" if first else f"{s['delta_ms']:+.1f}",
                     "" if first else _number(s["delta_quality_per_ms"], ".2e"),
                     "" if first else f"{s['delta_cost']:+.6f}", "" if first else ("yes" if s["within_noise"] else "no")])
    return headers, rows



"""Assemble the precision report (metrics, tie statistics, Spearman ρ per regime) and render it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from steadyrank.metrics import evaluate
from steadyrank.serve.output import format_table
from steadyrank.serve.tools.precision.candidates import Candidates
from steadyrank.serve.tools.precision.regimes import REFERENCE, Regime
from steadyrank.serve.tools.precision.scoring import RegimeKeys
from steadyrank.serve.tools.precision.stats import TIE_KS, mean_spearman, tie_statistics

METRIC_FIELDS = ("oblivious", "expected", "min", "max", "range", "bias")
Qrels = Mapping[str, Mapping[str, float]]


def regime_run(keys: Mapping[str, np.ndarray], candidates: Candidates) -> dict[str, dict[str, float]]:
    """``{qid: {docid: key}}`` in candidate order (the ``input`` tie-break order)."""
    return {qid: dict(zip(docs, keys[qid].tolist(), strict=False)) for qid, docs in candidates.items()}


def metric_summary(
    run: Mapping[str, Mapping[str, float]], qrels: Qrels, measures: Sequence[str], rel_level: float
) -> dict[str, dict[str, float | int]]:
    """Tie-aware macro means per measure: oblivious (input order), expected, min, max, range, bias, n_valid."""
    summary = evaluate(run, qrels, list(measures), rel_level=rel_level, tie_break="input").summary
    return {
        name: {**{f: float(row[f]) for f in METRIC_FIELDS}, "n_valid": int(row["n_valid"])}
        for name, row in summary.items()
    }


def curves(
    keys: RegimeKeys, candidates: Candidates, qrels: Qrels, names: Sequence[str], rel_level: float,
    ks: Sequence[int] = TIE_KS,
) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    """``{regime: {metric: {k: {expected, min, max}}}}`` for the plot (metric against k)."""
    measures = [f"{name}@{k}" for name in names for k in ks]
    out: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for regime, per_query in keys.items():
        summary = metric_summary(regime_run(per_query, candidates), qrels, measures, rel_level)
        out[regime] = {
            name: {str(k): {f: summary[f"{name}@{k}"][f] for f in ("expected", "min", "max")} for k in ks}
            for name in names
        }
    return out


def build_report(
    keys: RegimeKeys, regimes: Sequence[Regime], candidates: Candidates, qrels: Qrels,
    measures: Sequence[str], rel_level: float,
) -> dict[str, dict]:
    """``{"regimes": {name: {"precision", "scoring", "metrics", "ties", "spearman_vs_fp32"}}}``.

    ``keys`` must hold the FP32 reference regime as well as every requested one.
    """
    reference = keys[REFERENCE]
    out: dict[str, dict] = {}
    for regime in regimes:
        per_query = keys[regime.name]
        out[regime.name] = {
            "precision": regime.precision,
            "scoring": regime.scoring,
            "metrics": metric_summary(regime_run(per_query, candidates), qrels, measures, rel_level),
            "ties": tie_statistics(per_query),
            "spearman_vs_fp32": mean_spearman(per_query, reference),
        }
    return {"regimes": out}


def _four_digits(value: float | None) -> str | None:
    return None if value is None or not np.isfinite(value) else f"{value:.4f}"


def render_tables(report: Mapping[str, dict]) -> str:
    """Plain-text tables: metrics per regime, then tie statistics at k and Spearman ρ."""
    regimes = report["regimes"]
    metric_rows = [
        [name, measure, *(row[f] for f in METRIC_FIELDS)]
        for name, entry in regimes.items()
        for measure, row in entry["metrics"].items()
    ]
    parts = [format_table(["regime", "metric", *METRIC_FIELDS], metric_rows)]
    ks = [str(k) for k in TIE_KS]
    tie_rows = [
        [name, *(entry["ties"]["unique_at_k"][k] for k in ks), *(entry["ties"]["mean_tie_group_size_at_k"][k] for k in ks),
         _four_digits(entry["spearman_vs_fp32"])]
        for name, entry in regimes.items()
    ]
    headers = ["regime", *(f"uniq@{k}" for k in ks), *(f"grp@{k}" for k in ks), "spearman"]
    parts.append(format_table(headers, tie_rows, float_format="{:.2f}"))
    if "auto" in report:
        auto = report["auto"]
        parts.append(f"precision auto on this machine: {auto['precision']} ({auto['reason']})")
    return "\n\n".join(parts)

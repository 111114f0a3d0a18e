"""The sweep's picture: quality vs latency, frontier highlighted, marker area proportional to cost;
the frontier's latency–quality staircase with each step's ΔQ/Δms, the quality targets and their picks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from steadyrank.serve.output import save_png


def plot(decision: dict[str, Any], quality: str, latency_stat: str, path: Path) -> None:
    """Write a PNG: every configuration as a point (area ∝ cost per query), the frontier in colour
    and labelled, the best configuration starred, the staircase's steps labelled with ΔQ/Δms
    (quality per ms), each quality target as a dashed line and its pick as a diamond."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = decision["configurations"]
    cost = np.array([r["cost_per_query"] for r in rows])
    size = 20 + 280 * (cost - cost.min()) / (np.ptp(cost) or 1.0)
    front = np.array([r["frontier"] for r in rows])
    x = np.array([r["latency_ms"] for r in rows])
    y = np.array([r["quality"] for r in rows])
    fig, ax = plt.subplots(figsize=(10, 6.5))
    ax.scatter(x[~front], y[~front], s=size[~front], c="lightgray", edgecolors="gray", label="dominated")
    ax.scatter(x[front], y[front], s=size[front], c="tab:blue", edgecolors="black", label="Pareto frontier")
    for r in rows:
        if r["frontier"]:
            ax.annotate(r["config_id"], (r["latency_ms"], r["quality"]), fontsize=6, xytext=(4, 3),
                        textcoords="offset points")
    steps = decision.get("marginal", [])
    if steps:
        ax.plot([s["latency"] for s in steps], [s["quality"] for s in steps], drawstyle="steps-post",
                c="tab:blue", lw=1, alpha=0.6, label="latency–quality staircase")
        for s in steps:
            if s["delta_quality_per_ms"] is not None:
                ax.annotate(f"ΔQ/Δms {s['delta_quality_per_ms']:.1e}", (s["latency"], s["quality"]), fontsize=6,
                            xytext=(4, -9), textcoords="offset points", color="tab:blue")
    where = {r["config_id"]: r for r in rows}
    for t in decision.get("quality_target_picks", []):
        ax.axhline(t["quality_target"], ls="--", lw=0.8, c="tab:green")
        if t["pick"] is not None:
            chosen = where[t["pick"]]
            ax.scatter([chosen["latency_ms"]], [chosen["quality"]], marker="D", s=80, facecolors="none",
                       edgecolors="tab:green", linewidths=1.5, label=f"pick for Q ≥ {t['quality_target']:g}")
    best = next(r for r in rows if r["config_id"] == decision["best"])
    ax.scatter([best["latency_ms"]], [best["quality"]], marker="*", s=250, c="tab:red", label="best quality")
    ax.set_xlabel(f"total latency {latency_stat.replace('_ms', '')} (ms)")
    ax.set_ylabel(f"{quality} (expected over ties)")
    ax.set_title("CLQ sweep: quality vs latency (marker area ∝ cost per query)")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    save_png(fig, path)

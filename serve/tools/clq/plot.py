"""The sweep's picture: quality vs latency, frontier highlighted, marker area proportional to cost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def plot(decision: dict[str, Any], quality: str, latency_stat: str, path: Path) -> None:
    """Write a PNG: every configuration as a point (area ∝ cost per query), the frontier in colour
    and labelled, the best configuration starred."""
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
    best = next(r for r in rows if r["config_id"] == decision["best"])
    ax.scatter([best["latency_ms"]], [best["quality"]], marker="*", s=250, c="tab:red", label="best quality")
    ax.set_xlabel(f"total latency {latency_stat.replace('_ms', '')} (ms)")
    ax.set_ylabel(f"{quality} (expected over ties)")
    ax.set_title("CLQ sweep: quality vs latency (marker area ∝ cost per query)")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
    tmp.replace(path)

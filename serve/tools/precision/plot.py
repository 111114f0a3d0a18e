"""The report's figure: each metric against k per regime, the [min, max] band shaded, E[M] marked."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path


def plot_curves(curves: Mapping[str, Mapping[str, Mapping[str, Mapping[str, float]]]], path: Path) -> None:
    """Write a PNG with one panel per metric (x: k, log scale; y: metric) to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(next(iter(curves.values())))
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names, strict=False):
        ks: list[int] = []  # the ticks: the last regime's ks (curves is not empty: names came from it)
        for regime, per_metric in curves.items():
            points = [(int(k), v) for k, v in per_metric[name].items() if math.isfinite(v["expected"])]
            ks = [k for k, _ in points]
            line = ax.plot(ks, [v["expected"] for _, v in points], marker="o", markersize=3, label=f"{regime} E[M]")
            ax.fill_between(ks, [v["min"] for _, v in points], [v["max"] for _, v in points],
                            color=line[0].get_color(), alpha=0.2, linewidth=0)
        ax.set_xscale("log")
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.minorticks_off()
        ax.set_xlabel("k")
        ax.set_ylabel(name)
        ax.set_title(f"{name}@k: E[M] with [min, max] over tie orders")
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)

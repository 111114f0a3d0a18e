"""The plot of ``steadyrank probe names --plot``: ΔΔ% per ablation and language with 95 % CIs."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def plot_delta_delta(summary: list[dict], path: str | Path, title: str) -> None:
    """Horizontal bars of mean ΔΔ% (error bars: bootstrap CI) per ablation, one bar per language."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ablations = list(dict.fromkeys(r["ablation"] for r in summary if r["ablation"] != "base"))
    langs = sorted({r["lang"] for r in summary})
    by = {(r["ablation"], r["lang"]): r["delta_delta_pct"] for r in summary if "delta_delta_pct" in r}
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(ablations) * len(langs) + 1.5))
    height = 0.8 / max(1, len(langs))
    y = np.arange(len(ablations))
    for i, lang in enumerate(langs):
        stats = [by.get((a, lang), {"mean": np.nan, "low": np.nan, "high": np.nan}) for a in ablations]
        means = np.array([s["mean"] for s in stats])
        err = np.array([[m - s["low"] for m, s in zip(means, stats, strict=True)],
                        [s["high"] - m for m, s in zip(means, stats, strict=True)]])
        ax.barh(y + i * height, means, height, xerr=err, label=lang, capsize=2)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(y + height * (len(langs) - 1) / 2, ablations)
    ax.invert_yaxis()
    ax.set_xlabel("ΔΔ% of Δname vs base (95 % bootstrap CI)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)

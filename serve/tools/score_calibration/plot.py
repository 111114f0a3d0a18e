"""The reliability diagram of a calibration's held-out half (PNG)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from steadyrank.serve.output import save_png


def plot_reliability(held_out: dict[str, Any], title: str, path: Path) -> None:
    """Write a PNG: each non-empty bin's observed relevant rate against its mean calibrated score
    (marker area ∝ pairs in the bin), the diagonal of perfect calibration, the bins' edges, and the
    held-out ECE and Brier score in the legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bins = [b for b in held_out["reliability"] if b["count"]]
    counts = [b["count"] for b in bins]
    fig, ax = plt.subplots(figsize=(6, 6))
    ax.plot([0, 1], [0, 1], ls="--", c="gray", lw=1, label="perfect calibration")
    for b in held_out["reliability"]:
        ax.axvline(b["lower"], c="lightgray", lw=0.5)
    ax.plot([b["mean_predicted"] for b in bins], [b["observed_rate"] for b in bins], c="tab:blue", lw=1)
    ax.scatter([b["mean_predicted"] for b in bins], [b["observed_rate"] for b in bins],
               s=[20 + 300 * c / max(counts) for c in counts], c="tab:blue", edgecolors="black",
               label=f"held out: ECE {held_out['ece']:.3f}, Brier {held_out['brier']:.3f}")
    for b in bins:
        ax.annotate(str(b["count"]), (b["mean_predicted"], b["observed_rate"]), fontsize=7, xytext=(5, -10),
                    textcoords="offset points")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel(f"calibrated score (mean per bin; {held_out['binning']})")
    ax.set_ylabel("observed relevant rate")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    save_png(fig, path)

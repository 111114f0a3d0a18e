"""Δ-margins of one bundle and their summaries per ablation and language (the paper's §4.2).

With s the model's similarity of the query to each candidate (cosine for an embedder, the FP32 rank
key for a reranker), per bundle:

* Δname  = s(C1) − max(s(C2a), s(C2b))   (the name separates the author from impostors)
* Δtopic = s(C1) − s(C3)                 (the topic separates the right work of the same author)
* Δboth  = s(C1) − s(C4)

Margins are computed in float64 from the model's float32 values, so a margin is exactly 0 only when
the two values were equal in float32: a tie, counted, never a small margin.

ΔΔ% of an ablation, per bundle: 100 · (Δname(ablation) − Δname(base)) / Δname(base), over bundles
whose base Δname ≥ ``min_base`` (default 0.02: smaller bases make the ratio explode); the absolute
change Δname(ablation) − Δname(base) is reported over every bundle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from steadyrank.metrics.aggregate import bootstrap_ci

MARGINS = ("name", "topic", "both")
MIN_BASE_DELTA = 0.02


@dataclass(frozen=True)
class Margins:
    """Δname, Δtopic, Δboth of one bundle under one ablation."""

    name: float
    topic: float
    both: float


def margins(similarities: Sequence[float]) -> Margins:
    """Margins from the similarities of (C1, C2a, C2b, C3, C4) (module docstring)."""
    s = np.asarray(similarities, dtype=np.float64)
    if s.shape != (5,):
        raise ValueError(f"need 5 similarities (C1, C2a, C2b, C3, C4), got shape {s.shape}")
    if not np.all(np.isfinite(s)):
        raise ValueError(f"similarities must be finite, got {s.tolist()}")
    return Margins(float(s[0] - max(s[1], s[2])), float(s[0] - s[3]), float(s[0] - s[4]))


@dataclass(frozen=True)
class ProbeRow:
    """One bundle under one ablation."""

    bundle: str
    lang: str
    ablation: str
    similarities: tuple[float, ...]
    margins: Margins


def _ci(values: np.ndarray, seed: int) -> dict[str, float | int]:
    ci = bootstrap_ci(values, seed=seed)
    return {"mean": ci.estimate, "low": ci.low, "high": ci.high, "n": ci.n}


def summarize(rows: Sequence[ProbeRow], *, min_base: float = MIN_BASE_DELTA, seed: int = 0) -> list[dict]:
    """One record per (ablation, language): mean Δname/Δtopic/Δboth with 95 % bootstrap CIs,
    ``ties`` (margins exactly 0, per margin), and against ``base``: ``delta_name_abs`` (mean change
    of Δname, every bundle) and ``delta_delta_pct`` (ΔΔ%, bundles with base Δname ≥ ``min_base``;
    ``excluded``: the others)."""
    base = {(r.bundle, r.lang): r.margins for r in rows if r.ablation == "base"}
    groups: dict[tuple[str, str], list[ProbeRow]] = {}
    for r in rows:
        groups.setdefault((r.ablation, r.lang), []).append(r)
    out = []
    for (ablation, lang), members in groups.items():
        record: dict = {"ablation": ablation, "lang": lang, "n": len(members)}
        for m in MARGINS:
            record[f"delta_{m}"] = _ci(np.array([getattr(r.margins, m) for r in members]), seed)
        record["ties"] = {m: int(sum(getattr(r.margins, m) == 0.0 for r in members)) for m in MARGINS}
        paired = [(r.margins.name, base[(r.bundle, r.lang)].name) for r in members if (r.bundle, r.lang) in base]
        if paired:
            ablated, before = np.array(paired).T
            kept = before >= min_base
            record["delta_name_abs"] = _ci(ablated - before, seed)
            record["delta_delta_pct"] = _ci(100.0 * (ablated[kept] - before[kept]) / before[kept], seed)
            record["excluded"] = int((~kept).sum())
        out.append(record)
    return out

"""Dynamic-K routing: rerank ``k_low`` candidates, escalate to ``k_high`` only on uncertainty.

The policy (:func:`decide`) is a pure function of :class:`RoutingSignals` and
:class:`RoutingSettings`. It escalates when any enabled signal fires; every fired signal is a
reason. A threshold of ``None`` disables its signal. Signals (computed by the ``*_signal``
functions below from one query's lists):

- ``dense_margin = cos_1 − cos_m`` (``m = margin_at``, ranks 1-based) of the dense list; fires when
  ``< margin_below``: the top candidates are hard to tell apart, deeper ones may be as good.
- ``rerank_entropy = H(softmax(s / T)) / ln n`` over the reranker scores ``s`` of the first
  ``n = k_low`` candidates (``T = entropy_temperature``, in score units; 0 = one clear winner,
  1 = uniform); fires when ``> entropy_above``.
- ``tie_at_top_n``: a tie group of exactly equal reranker scores (first ``k_low``) straddles
  ``top_n``; fires when true and ``tie_enabled``.
- ``overlap = |D_m ∩ B_m| / m`` of the dense and BM25 top ``m = overlap_at`` (hybrid only); fires
  when ``< overlap_below``: the two retrievers disagree.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Literal

import numpy as np

from steadyrank.metrics import straddling_group

Route = Literal["dynamic", "fixed50", "fixed100"]
ROUTES: tuple[Route, ...] = ("dynamic", "fixed50", "fixed100")


@dataclass(frozen=True)
class RoutingSettings:
    """Depths, signal parameters and thresholds (``None`` disables a signal)."""

    k_low: int = 50
    k_high: int = 100
    top_n: int = 10
    margin_at: int = 10
    margin_below: float | None = 0.05
    entropy_temperature: float = 0.1
    entropy_above: float | None = 0.99
    tie_enabled: bool = True
    overlap_at: int = 10
    overlap_below: float | None = 0.2

    def __post_init__(self) -> None:
        if not 1 <= self.k_low <= self.k_high:
            raise ValueError(f"need 1 ≤ k_low ≤ k_high, got k_low={self.k_low}, k_high={self.k_high}")
        if min(self.top_n, self.margin_at, self.overlap_at) < 1:
            raise ValueError("top_n, margin_at and overlap_at must be ≥ 1")
        if self.margin_at < 2:
            raise ValueError("margin_at must be ≥ 2 (the margin is cos_1 − cos_margin_at)")
        if self.entropy_temperature <= 0:
            raise ValueError(f"entropy_temperature must be > 0, got {self.entropy_temperature}")

    def to_json(self) -> dict[str, Any]:
        """Plain dict (the ``routing`` object of a settings file)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RoutingSettings:
        """Inverse of :meth:`to_json`; unknown keys are refused (a typo must not silently do nothing)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown routing setting(s) {unknown}; known: {sorted(known)}")
        return cls(**data)


def save_settings(path: str | Path, settings: RoutingSettings, provenance: dict[str, Any] | None = None) -> None:
    """Write ``{"routing": settings, "calibration": provenance}`` as JSON."""
    document: dict[str, Any] = {"routing": settings.to_json()}
    if provenance is not None:
        document["calibration"] = provenance
    Path(path).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def load_settings(path: str | Path) -> RoutingSettings:
    """Read the ``routing`` object of a settings file written by :func:`save_settings`."""
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(document, dict) or "routing" not in document:
        raise ValueError(f"{path}: expected a JSON object with a 'routing' key")
    return RoutingSettings.from_json(document["routing"])


@dataclass(frozen=True)
class RoutingSignals:
    """One query's uncertainty signals; ``None`` = not available (list too short, mode lacks it)."""

    n_candidates: int
    dense_margin: float | None = None
    rerank_entropy: float | None = None
    tie_at_top_n: bool | None = None
    overlap: float | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain dict for run reports."""
        return asdict(self)


#: Reason codes of a routing decision (low-cardinality: metric labels, counts by reason).
REASON_CODES = ("dense_margin", "rerank_entropy", "tie_at_top_n", "overlap", "route")


@dataclass(frozen=True)
class RoutingDecision:
    """How many candidates to rerank and why. ``escalated``: more than ``k_low`` are reranked.

    ``reasons`` are human-readable (with the signal values); ``codes[i]`` is the
    :data:`REASON_CODES` entry of ``reasons[i]``.
    """

    k_rerank: int
    escalated: bool
    reasons: tuple[str, ...]
    codes: tuple[str, ...]


def fired_signals(signals: RoutingSignals, settings: RoutingSettings) -> tuple[tuple[str, str], ...]:
    """``(code, reason)`` for every enabled signal that fires."""
    fired = []
    if settings.margin_below is not None and signals.dense_margin is not None:
        if signals.dense_margin < settings.margin_below:
            fired.append(("dense_margin", f"dense_margin {signals.dense_margin:.4f} < {settings.margin_below:.4f} "
                                          f"(cos@1 − cos@{settings.margin_at})"))
    if settings.entropy_above is not None and signals.rerank_entropy is not None:
        if signals.rerank_entropy > settings.entropy_above:
            fired.append(("rerank_entropy",
                          f"rerank_entropy {signals.rerank_entropy:.4f} > {settings.entropy_above:.4f}"))
    if settings.tie_enabled and signals.tie_at_top_n:
        fired.append(("tie_at_top_n", f"tie group straddles top_n={settings.top_n}"))
    if settings.overlap_below is not None and signals.overlap is not None:
        if signals.overlap < settings.overlap_below:
            fired.append(("overlap", f"overlap@{settings.overlap_at} {signals.overlap:.2f} < "
                                     f"{settings.overlap_below:.2f} (dense vs bm25)"))
    return tuple(fired)


def decide(signals: RoutingSignals, settings: RoutingSettings, route: Route = "dynamic") -> RoutingDecision:
    """The number of candidates to rerank: ``min(k_low, n)``, or ``min(k_high, n)`` when escalating.

    ``fixed50`` never escalates, ``fixed100`` always does; ``dynamic`` escalates iff a signal fires.
    """
    low = min(settings.k_low, signals.n_candidates)
    high = min(settings.k_high, signals.n_candidates)
    if route == "fixed50":
        return RoutingDecision(low, False, ("route fixed50: rerank k_low",), ("route",))
    if route == "fixed100":
        return RoutingDecision(high, high > low, ("route fixed100: rerank k_high",), ("route",))
    if route != "dynamic":
        raise ValueError(f"unknown route {route!r}; choose one of {', '.join(ROUTES)}")
    fired = fired_signals(signals, settings)
    escalate = bool(fired) and high > low
    return RoutingDecision(high if escalate else low, escalate,
                           tuple(reason for _, reason in fired), tuple(code for code, _ in fired))


# ---- signals ---------------------------------------------------------------------------------


def margin_signal(dense_scores: np.ndarray, at: int) -> float | None:
    """``cos_1 − cos_at`` of a best-first score list; None when it holds fewer than ``at`` scores."""
    if len(dense_scores) < at:
        return None
    return float(dense_scores[0]) - float(dense_scores[at - 1])


def entropy_signal(scores: np.ndarray, temperature: float) -> float | None:
    """Normalised Shannon entropy ``H(p) / ln n`` of ``p = softmax(scores / temperature)``; None if n < 2."""
    values = np.asarray(scores, dtype=np.float64)
    if values.size < 2:
        return None
    z = values / temperature
    z -= z.max()
    p = np.exp(z)
    p /= p.sum()
    nonzero = p[p > 0]
    return float(-(nonzero * np.log(nonzero)).sum() / np.log(values.size))


def tie_signal(scores: np.ndarray, top_n: int) -> bool | None:
    """Whether a tie group of exactly equal scores straddles ``top_n``; None without a cutoff (n ≤ top_n)."""
    if len(scores) <= top_n:
        return None
    return straddling_group(scores, top_n) is not None


def overlap_signal(first: Sequence[str], second: Sequence[str], at: int) -> float | None:
    """``|first[:at] ∩ second[:at]| / at``; None when either list is empty."""
    if not first or not second:
        return None
    return len(set(first[:at]) & set(second[:at])) / at


def compute_signals(
    settings: RoutingSettings,
    *,
    n_candidates: int,
    rerank_scores: np.ndarray,
    dense_scores: np.ndarray | None = None,
    dense_ids: Sequence[str] | None = None,
    sparse_ids: Sequence[str] | None = None,
) -> RoutingSignals:
    """All signals for one query. ``rerank_scores``: the reranker's scores of the first ``k_low``
    candidates; ``dense_*`` / ``sparse_ids``: the component lists the mode produced (None if not)."""
    first = np.asarray(rerank_scores)[: settings.k_low]
    return RoutingSignals(
        n_candidates=n_candidates,
        dense_margin=None if dense_scores is None else margin_signal(dense_scores, settings.margin_at),
        rerank_entropy=entropy_signal(first, settings.entropy_temperature),
        tie_at_top_n=tie_signal(first, settings.top_n),
        overlap=(None if dense_ids is None or sparse_ids is None
                 else overlap_signal(dense_ids, sparse_ids, settings.overlap_at)),
    )

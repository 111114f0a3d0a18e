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
- ``boundary_gap = (mean of the top_n best reranker scores − best score among retrieval positions
  k_low − b + 1 … k_low) / std(first k_low scores)`` (``b = boundary_at``); fires when
  ``< boundary_below``: the candidates at the retrieval cut still compete with the head.
- ``tail_mass = Σ p_i`` over retrieval positions ``k_low/2 < i ≤ k_low`` of ``p = softmax(s / T)``
  of the first ``k_low`` reranker scores; fires when ``> tail_mass_above``: relevance sits deep.
- ``first_stage_gap = (f_1 − f_{k_low}) / |f_1|`` of the first-stage scores (BM25 when the mode has
  BM25, else cosine); fires when ``< first_stage_gap_below``: a flat first-stage list.
- ``model``: ``p = σ(b + Σ_j w_j (x_j − μ_j) / σ_j)`` over the named signals (a missing signal
  counts as its mean), a logistic model fitted by ``steadyrank route calibrate --model``; fires
  when ``p > model_above``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np

from steadyrank.metrics import straddling_group
from steadyrank.retrieval.fsio import atomic_write_bytes

Route = Literal["dynamic", "fixed50", "fixed100"]
ROUTES: tuple[Route, ...] = ("dynamic", "fixed50", "fixed100")

#: Signals a routing model may read (numeric fields of :class:`RoutingSignals`).
MODEL_FEATURES = ("dense_margin", "rerank_entropy", "overlap", "boundary_gap", "tail_mass", "first_stage_gap")


def _doc(text: str) -> dict[str, str]:
    """A routing setting's description (``Field(description=...)`` of the settings' routing section)."""
    return {"description": text}


@dataclass(frozen=True)
class RoutingSettings:
    """Depths, signal parameters and thresholds (``None`` disables a signal). Each field's
    ``metadata["description"]`` documents it wherever it can be set (``routing.*`` of the settings)."""

    k_low: int = field(default=50, metadata=_doc("candidates always reranked"))
    k_high: int = field(default=100, metadata=_doc("candidates retrieved, reranked when escalating"))
    top_n: int = field(default=10, metadata=_doc("default results per /v1/search"))
    margin_at: int = field(default=10, metadata=_doc("m of the dense_margin signal cos@1 − cos@m, at least 2"))
    margin_below: float | None = field(default=0.05, metadata=_doc("dense_margin fires below this"))
    entropy_temperature: float = field(default=0.1, metadata=_doc(
        "T of rerank_entropy = H(softmax(s/T)) / ln n and of tail_mass, in score units, > 0"))
    entropy_above: float | None = field(default=0.99, metadata=_doc("rerank_entropy fires above this"))
    tie_enabled: bool = field(default=True, metadata=_doc("escalate when a tie straddles top_n"))
    overlap_at: int = field(default=10, metadata=_doc("m of the overlap signal |dense@m ∩ bm25@m| / m"))
    overlap_below: float | None = field(default=0.2, metadata=_doc("overlap fires below this"))
    boundary_at: int = field(default=10, metadata=_doc(
        "b of boundary_gap: the last b reranker scores of the first k_low, in retrieval order"))
    boundary_below: float | None = field(default=None, metadata=_doc(
        "boundary_gap = (mean of the top_n best − best of the last boundary_at) / std fires below this"))
    tail_mass_above: float | None = field(default=None, metadata=_doc(
        "tail_mass (softmax mass of retrieval positions k_low/2 … k_low) fires above this"))
    first_stage_gap_below: float | None = field(default=None, metadata=_doc(
        "first_stage_gap = (f_1 − f_k_low) / |f_1| of the first-stage scores fires below this"))
    model_features: tuple[str, ...] = field(default=(), metadata=_doc(
        f"signals read by the fitted routing model (of {', '.join(MODEL_FEATURES)})"))
    model_mean: tuple[float, ...] = field(default=(), metadata=_doc("the model's feature means μ_j"))
    model_scale: tuple[float, ...] = field(default=(), metadata=_doc("the model's feature scales σ_j"))
    model_coef: tuple[float, ...] = field(default=(), metadata=_doc("the model's coefficients w_j"))
    model_intercept: float = field(default=0.0, metadata=_doc("the model's intercept b"))
    model_above: float | None = field(default=None, metadata=_doc(
        "the model fires when p = σ(b + Σ w_j (x_j − μ_j) / σ_j) is above this"))

    def __post_init__(self) -> None:
        for name in ("model_features", "model_mean", "model_scale", "model_coef"):
            object.__setattr__(self, name, tuple(getattr(self, name)))  # JSON lists → tuples
        sizes = {len(self.model_features), len(self.model_mean), len(self.model_scale), len(self.model_coef)}
        if len(sizes) != 1:
            raise ValueError("model_features, model_mean, model_scale and model_coef must have equal lengths")
        unknown = sorted(set(self.model_features) - set(MODEL_FEATURES))
        if unknown:
            raise ValueError(f"unknown model feature(s) {unknown}; known: {list(MODEL_FEATURES)}")
        if self.model_above is not None and not self.model_features:
            raise ValueError("model_above needs a fitted model (model_features …)")
        if self.boundary_at < 1:
            raise ValueError("boundary_at must be ≥ 1")
        if not 1 <= self.k_low <= self.k_high:
            raise ValueError(f"need 1 ≤ k_low ≤ k_high, got k_low={self.k_low}, k_high={self.k_high}")
        if min(self.top_n, self.margin_at, self.overlap_at) < 1:
            raise ValueError("top_n, margin_at and overlap_at must be ≥ 1")
        if self.margin_at < 2:
            raise ValueError("margin_at must be ≥ 2 (the margin is cos_1 − cos_margin_at)")
        if self.entropy_temperature <= 0:
            raise ValueError(f"entropy_temperature must be > 0, got {self.entropy_temperature}")

    def for_top_n(self, top_n: int) -> RoutingSettings:
        """The policy of one search asking for ``top_n`` results (``/v1/search`` and ``steadyrank
        search`` alike): ``k_low`` raised to ``top_n`` (results come from the reranked candidates),
        never above ``k_high``."""
        return replace(self, top_n=top_n, k_low=min(max(self.k_low, top_n), self.k_high))

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
    """Write ``{"routing": settings, "calibration": provenance}`` as JSON, atomically
    (:func:`~retrieval.fsio.atomic_write_bytes`): a crash or a full disk mid-write leaves the previous
    file whole, so the server that reads it at start never finds it torn."""
    document: dict[str, Any] = {"routing": settings.to_json()}
    if provenance is not None:
        document["calibration"] = provenance
    atomic_write_bytes(Path(path), (json.dumps(document, indent=2) + "\n").encode("utf-8"))


def load_settings(path: str | Path) -> RoutingSettings:
    """Read the ``routing`` object of a settings file written by :func:`save_settings`."""
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(document, dict) or "routing" not in document:
        raise ValueError(f"{path}: expected a JSON object with a 'routing' key")
    # a JSON object: string keys (from_json checks the routing object's own keys)
    return RoutingSettings.from_json(cast("dict[str, Any]", document)["routing"])


@dataclass(frozen=True)
class RoutingSignals:
    """One query's uncertainty signals; ``None`` = not available (list too short, mode lacks it)."""

    n_candidates: int
    dense_margin: float | None = None
    rerank_entropy: float | None = None
    tie_at_top_n: bool | None = None
    overlap: float | None = None
    boundary_gap: float | None = None
    tail_mass: float | None = None
    first_stage_gap: float | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain dict for run reports."""
        return asdict(self)


#: Reason codes of a routing decision (low-cardinality: metric labels, counts by reason).
REASON_CODES = ("dense_margin", "rerank_entropy", "tie_at_top_n", "overlap", "boundary_gap", "tail_mass",
                "first_stage_gap", "model", "route")


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
    fired: list[tuple[str, str]] = []
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
    for code, threshold, below in (("boundary_gap", settings.boundary_below, True),
                                   ("tail_mass", settings.tail_mass_above, False),
                                   ("first_stage_gap", settings.first_stage_gap_below, True)):
        value = getattr(signals, code)
        if threshold is not None and value is not None and (value < threshold if below else value > threshold):
            fired.append((code, f"{code} {value:.4f} {'<' if below else '>'} {threshold:.4f}"))
    if settings.model_above is not None:
        probability = model_probability(signals, settings)
        if probability > settings.model_above:
            fired.append(("model", f"model p {probability:.3f} > {settings.model_above:.3f}"))
    return tuple(fired)


def model_probability(signals: RoutingSignals, settings: RoutingSettings) -> float:
    """``σ(b + Σ_j w_j (x_j − μ_j) / σ_j)``; a missing signal contributes 0 (counts as its mean)."""
    z = settings.model_intercept
    for name, mean, scale, coef in zip(settings.model_features, settings.model_mean, settings.model_scale,
                                       settings.model_coef, strict=True):
        value = getattr(signals, name)
        if value is not None:
            z += coef * (float(value) - mean) / scale
    return float(1.0 / (1.0 + np.exp(-z)))


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


def boundary_gap_signal(scores: np.ndarray, top_n: int, at: int) -> float | None:
    """``(mean of the top_n best − max of the last ``at`` scores) / std(scores)`` of retrieval-ordered
    reranker scores; None when fewer than ``top_n + at`` scores or all scores are equal."""
    values = np.asarray(scores, dtype=np.float64)
    if values.size < top_n + at:
        return None
    spread = float(values.std())
    if spread == 0:
        return None
    head = float(np.sort(values)[::-1][:top_n].mean())
    return (head - float(values[-at:].max())) / spread


def tail_mass_signal(scores: np.ndarray, temperature: float) -> float | None:
    """Softmax (``scores / temperature``) mass of the second half of retrieval-ordered scores; None if n < 2."""
    values = np.asarray(scores, dtype=np.float64)
    if values.size < 2:
        return None
    z = values / temperature
    p = np.exp(z - z.max())
    p /= p.sum()
    return float(p[values.size // 2 :].sum())


def first_stage_gap_signal(scores: np.ndarray | None, at: int) -> float | None:
    """``(f_1 − f_at) / |f_1|`` of a best-first first-stage score list; None if shorter or f_1 = 0."""
    if scores is None or len(scores) < at or float(scores[0]) == 0:
        return None
    return (float(scores[0]) - float(scores[at - 1])) / abs(float(scores[0]))


def compute_signals(
    settings: RoutingSettings,
    *,
    n_candidates: int,
    rerank_scores: np.ndarray,
    dense_scores: np.ndarray | None = None,
    dense_ids: Sequence[str] | None = None,
    sparse_ids: Sequence[str] | None = None,
    sparse_scores: np.ndarray | None = None,
) -> RoutingSignals:
    """All signals for one query. ``rerank_scores``: the reranker's scores of the first ``k_low``
    candidates; ``dense_*`` / ``sparse_*``: the component lists the mode produced (None if not)."""
    first = np.asarray(rerank_scores)[: settings.k_low]
    first_stage = sparse_scores if sparse_scores is not None else dense_scores
    return RoutingSignals(
        boundary_gap=boundary_gap_signal(first, settings.top_n, settings.boundary_at),
        tail_mass=tail_mass_signal(first, settings.entropy_temperature),
        first_stage_gap=first_stage_gap_signal(first_stage, settings.k_low),
        n_candidates=n_candidates,
        dense_margin=None if dense_scores is None else margin_signal(dense_scores, settings.margin_at),
        rerank_entropy=entropy_signal(first, settings.entropy_temperature),
        tie_at_top_n=tie_signal(first, settings.top_n),
        overlap=(None if dense_ids is None or sparse_ids is None
                 else overlap_signal(dense_ids, sparse_ids, settings.overlap_at)),
    )

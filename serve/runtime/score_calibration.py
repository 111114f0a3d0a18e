"""Calibrated scores: a fitted, strictly increasing map from a reranker's FP32 rank key to P(relevant).

``relevance_score`` is each model's own φ (sigmoid, softmax, cosine), so a threshold on it means
something else for every model. A calibration file (written by ``steadyrank calibrate``) holds a
Platt map fitted on a golden set's judgments of that one model:

    calibrated_score(key) = σ(a · key + b) = 1 / (1 + exp(−(a · key + b))),   a > 0,

the estimated probability that a document with FP32 rank key ``key`` (the logit, or logit margin,
under HPS; a bi-encoder's FP32 dot product) has a grade ≥ the calibration's threshold. ``a > 0``
makes the map strictly increasing, so it orders as the key does and the served order is unchanged.
It is evaluated in float64 from the FP32 key (never in the key's own precision, where σ would merge
nearby keys): two FP32 keys get two different calibrated scores whenever float64 can hold the
difference, ``a · Δkey · p(1 − p)`` above the spacing of float64 numbers at ``p`` (2⁻⁵³ near 1) —
so keys a BF16 model ties and an FP32 re-score separates (relative differences ≥ 2⁻²³) stay apart
while ``1 − p`` is above about 10⁻⁹; nearer 1, float64 cannot tell such keys apart.

The file also records what it was fitted on (model id, folder revision and digest, precision,
golden set id and digest, threshold) and the held-out metrics. A server refuses a calibration fitted
on another model id unless the model's ``score_calibration_mismatch`` is ``flag``
(:func:`check_model`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from steadyrank.serve.runtime.settings import ModelSettings

#: The ``format`` field of a calibration file.
FORMAT = "steadyrank-score-calibration/1"


class CalibrationMismatchError(ValueError):
    """A calibration file was fitted on another model than the one it is set on."""


def platt_probability(keys: np.ndarray, slope: float, intercept: float) -> np.ndarray:
    """``σ(slope · key + intercept)`` in float64, without overflow: with ``e = exp(−|z|)``,
    σ(z) = 1 / (1 + e) for z ≥ 0 and e / (1 + e) for z < 0."""
    z = slope * np.asarray(keys, dtype=np.float64) + intercept
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


@dataclass(frozen=True)
class ScoreCalibration:
    """A fitted Platt map and what it was fitted on (module docstring).

    ``slope`` (a, per key unit, > 0) and ``intercept`` (b); ``model_id`` as the server names the model;
    ``model_revision`` (Hub commit of a Hub snapshot folder, else None) and ``model_digest`` (sha256
    of the folder's files); ``precision`` and ``scoring`` the keys were computed in; ``golden`` (the
    golden set's id, path and sha256) and ``threshold`` (rubric grade ≥ threshold = relevant);
    ``held_out``: the metrics on the held-out half; ``fit``: the split and fit facts."""

    slope: float
    intercept: float
    model_id: str
    precision: str
    scoring: str
    threshold: int
    golden: dict[str, Any]
    model_revision: str | None = None
    model_digest: str | None = None
    method: str = "platt"
    held_out: dict[str, Any] = field(default_factory=dict)
    fit: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (np.isfinite(self.slope) and np.isfinite(self.intercept)):
            raise ValueError("the calibration's slope and intercept must be finite")
        if self.slope <= 0:
            raise ValueError(f"the calibration's slope must be > 0 (a strictly increasing map), got {self.slope}")

    def apply(self, keys: np.ndarray) -> np.ndarray:
        """Calibrated scores, float64, of rank ``keys`` (any float array): σ(a·key + b)."""
        return platt_probability(keys, self.slope, self.intercept)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "calibration") -> ScoreCalibration:
        if data.get("format") != FORMAT:
            raise ValueError(f"{source}: not a steadyrank score calibration (format {data.get('format')!r}, "
                             f"expected {FORMAT!r}); write one with `steadyrank calibrate`")
        fields = {k: v for k, v in data.items() if k != "format"}
        try:
            return cls(**fields)
        except TypeError as exc:
            raise ValueError(f"{source}: {exc}") from None

    def facts(self, mismatch: bool) -> dict[str, Any]:
        """What a served answer reports about the calibration (``meta.calibration``)."""
        return {"model": self.model_id, "golden": self.golden.get("id"), "threshold": self.threshold,
                "method": self.method, "model_mismatch": mismatch}


def load_calibration(path: str | Path) -> ScoreCalibration:
    """Read a calibration file (ValueError naming the file when it is not one)."""
    path = Path(path).expanduser()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no calibration file (write one with `steadyrank calibrate`)") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a calibration file is a JSON object")
    return ScoreCalibration.from_json(data, str(path))


def check_model(calibration: ScoreCalibration, served_model_id: str, *, allow_mismatch: bool) -> bool:
    """True when the calibration was fitted on another model and ``allow_mismatch`` lets it be served
    (flagged); False when the ids match. Raises :class:`CalibrationMismatchError` otherwise."""
    if calibration.model_id == served_model_id:
        return False
    if allow_mismatch:
        return True
    raise CalibrationMismatchError(
        f"the score calibration was fitted on model {calibration.model_id!r}, but the model served is "
        f"{served_model_id!r}: recalibrate with `steadyrank calibrate` on this model, or set "
        f"score_calibration_mismatch: flag to serve it flagged (meta.calibration.model_mismatch)")


@dataclass(frozen=True)
class ServedCalibration:
    """A calibration as a server applies it: the map and whether it was fitted on another model."""

    calibration: ScoreCalibration
    model_mismatch: bool

    def apply(self, keys: np.ndarray) -> np.ndarray:
        return self.calibration.apply(keys)

    def facts(self) -> dict[str, Any]:
        return self.calibration.facts(self.model_mismatch)


def served_calibration(model: ModelSettings, served_model_id: str) -> ServedCalibration | None:
    """The calibration ``model.score_calibration`` names, checked against ``served_model_id``
    (:func:`check_model`); None when the model has none."""
    if model.score_calibration is None:
        return None
    calibration = load_calibration(model.score_calibration)
    flagged = check_model(calibration, served_model_id, allow_mismatch=model.score_calibration_mismatch == "flag")
    return ServedCalibration(calibration, flagged)

"""The ``routing`` section: dynamic-K routing (:mod:`retrieval.routing`) as settings.

Beside ``route``, ``file`` and ``disable``, the section has one optional field per field of
:class:`~retrieval.routing.RoutingSettings`, of the same type or null (unset); each field's
description and default are read from the dataclass (:func:`_unset`), so the policy keeps one
source. tests/serve/test_settings_routing.py fails when the two drift apart.
"""

from __future__ import annotations

import json
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from steadyrank.retrieval.routing import Route, RoutingSettings
from steadyrank.retrieval.routing import load_settings as load_routing_file
from steadyrank.serve.settings.base import Section

Signal = Literal["margin", "entropy", "overlap", "boundary", "tail_mass", "first_stage_gap", "model"]
#: A signal of ``routing.disable`` → the threshold it nulls.
_THRESHOLD_OF: dict[str, str] = {"margin": "margin_below", "entropy": "entropy_above", "overlap": "overlap_below",
                                 "boundary": "boundary_below", "tail_mass": "tail_mass_above",
                                 "first_stage_gap": "first_stage_gap_below", "model": "model_above"}


def _default_text(value: Any) -> str:
    """A routing default as a description says it: ``50``, ``true``, ``off`` (None), ``none`` (empty)."""
    if value is None:
        return "off"
    return "none" if value == () else json.dumps(value)


def _unset(name: str) -> Any:
    """The section's field for ``RoutingSettings.<name>``: null (unset) by default, described as the
    dataclass describes it (``metadata["description"]``) with its built-in default."""
    spec = next(f for f in dataclass_fields(RoutingSettings) if f.name == name)
    return Field(default=None, description=f"{spec.metadata['description']} (default {_default_text(spec.default)})")


class RoutingSection(Section):
    """Dynamic-K routing (``retrieval.routing``): every field of its ``RoutingSettings``, each null
    (unset) by default. An unset field comes from ``file``, else the built-in default; a signal is
    switched off with ``disable`` (a null threshold means "unset")."""

    route: Route = Field(default="dynamic", description="dynamic (escalate on uncertainty), fixed50 (k_low), fixed100 (k_high)")
    file: str | None = Field(default=None, description="routing settings JSON written by `steadyrank route calibrate`")
    disable: list[Signal] = Field(
        default_factory=list, description="signals to switch off (their thresholds become null)"
    )

    k_low: int | None = _unset("k_low")
    k_high: int | None = _unset("k_high")
    top_n: int | None = _unset("top_n")
    margin_at: int | None = _unset("margin_at")
    margin_below: float | None = _unset("margin_below")
    entropy_temperature: float | None = _unset("entropy_temperature")
    entropy_above: float | None = _unset("entropy_above")
    tie_enabled: bool | None = _unset("tie_enabled")
    overlap_at: int | None = _unset("overlap_at")
    overlap_below: float | None = _unset("overlap_below")
    boundary_at: int | None = _unset("boundary_at")
    boundary_below: float | None = _unset("boundary_below")
    tail_mass_above: float | None = _unset("tail_mass_above")
    first_stage_gap_below: float | None = _unset("first_stage_gap_below")
    model_features: tuple[str, ...] | None = _unset("model_features")
    model_mean: tuple[float, ...] | None = _unset("model_mean")
    model_scale: tuple[float, ...] | None = _unset("model_scale")
    model_coef: tuple[float, ...] | None = _unset("model_coef")
    model_intercept: float | None = _unset("model_intercept")
    model_above: float | None = _unset("model_above")

    @model_validator(mode="after")
    def _valid_policy(self) -> RoutingSection:
        if self.file is not None and not Path(self.file).expanduser().is_file():
            raise ValueError(f"file: no such file: {self.file}")
        self.policy()  # a ValueError here names the bad routing values
        return self

    def policy(self) -> RoutingSettings:
        """The routing policy: file (or defaults), then the fields set here, then ``disable``."""
        base = load_routing_file(Path(self.file).expanduser()) if self.file else RoutingSettings()
        values = base.to_json()
        values.update({k: getattr(self, k) for k in values if getattr(self, k) is not None})
        for signal in self.disable:
            values[_THRESHOLD_OF[signal]] = None
        return RoutingSettings(**values)

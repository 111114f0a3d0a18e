"""The ``telemetry`` section: how each replica sends its metrics to the hub."""

from __future__ import annotations

from pydantic import Field

from steadyrank.serve.settings.base import Section


class TelemetrySettings(Section):
    flush_interval_s: float = Field(default=0.5, gt=0, le=60, description="how often each replica sends its metrics to the hub")

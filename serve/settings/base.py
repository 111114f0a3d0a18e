"""What every settings section shares: :class:`Section` (unknown keys are errors) and
:class:`SettingsError`, the one error of invalid settings."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SettingsError(ValueError):
    """Invalid settings; the message has one ``field.path: problem`` line per error."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")

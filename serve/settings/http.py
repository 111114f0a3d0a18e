"""The ``http`` section: where ``steadyrank serve`` listens."""

from __future__ import annotations

from pydantic import Field

from steadyrank.serve.settings.base import Section


class HttpSettings(Section):
    """Where `steadyrank serve` listens (serve_config.yaml's http_options take over under `serve run/deploy`)."""

    host: str = Field(default="127.0.0.1", description="bind address (0.0.0.0 = every interface)")
    port: int = Field(default=8000, ge=1, le=65535)

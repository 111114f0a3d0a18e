"""The ``server`` section: the lifecycle of ``steadyrank serve``, logging and tracing."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from steadyrank.serve.settings.base import Section
from steadyrank.serve.tracing import EXTRA_HINT as TRACING_HINT
from steadyrank.serve.tracing import available as tracing_available


class ServerSettings(Section):
    """Lifecycle of `steadyrank serve`: shutdown grace, Ray's dashboard and Serve's access log."""

    shutdown_grace_s: float = Field(
        default=30.0, ge=0, le=3600,
        description="on SIGTERM/SIGINT: seconds the whole stop may take; in-flight requests get all but the last "
                    "10 s (the teardown's) to finish before Ray is shut down",
    )
    dashboard: bool = Field(default=False, description="start Ray's dashboard (and its agent processes) with the local Ray")
    ingress: Literal["haproxy", "proxy"] = Field(
        default="haproxy", description="HTTP front of a local Ray head: haproxy (Ray Serve's HAProxy ingress: HAProxy routes "
                               "each request to the Ingress replica's own HTTP server) or proxy (Ray Serve's Python "
                               "proxy, one more hop); with --address the cluster's Ray settings decide")
    access_log: bool = Field(default=False, description="Ray Serve's per-request access log lines (proxy and every replica) "
                                                "in Ray's log folder; steadyrank's metrics count every request either way")
    log_format: Literal["text", "json"] = Field(
        default="text", description="steadyrank's log lines: text, or one JSON object per line (ts, level, logger, message, "
                            "request_id); every line about a request carries its request id")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] | None = Field(
        default=None, description="level of Ray's and Ray Serve's own log lines (unset: WARNING, a quiet start); "
                          "steadyrank's own lines are at INFO or this level when set")
    tracing: bool = Field(
        default=False, description="OpenTelemetry spans of every request (ingress, model and retriever calls), continuing "
                           "the trace of a W3C traceparent header; exported over OTLP/HTTP (OTEL_EXPORTER_OTLP_*) unless "
                           "the process has a tracer provider; needs the otel extra")

    @field_validator("tracing")
    @classmethod
    def _otel_installed(cls, value: bool) -> bool:
        if value and not tracing_available():
            raise ValueError(f"needs OpenTelemetry; {TRACING_HINT}")
        return value

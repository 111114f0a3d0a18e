"""What one ingress replica's HTTP application holds, typed: :class:`AppParts`, kept in
``app.state.parts`` by :func:`~serve.server.http.app.create_app` and read by routes and dependencies
through :func:`parts_of` (Starlette's ``app.state`` itself is untyped)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.requests import Request

if TYPE_CHECKING:
    from steadyrank.serve.server.admission.gate import Gate
    from steadyrank.serve.server.http.deps import Keys
    from steadyrank.serve.server.http.gateway import Gateway
    from steadyrank.serve.server.http.routers.health import ReadyCache
    from steadyrank.serve.server.http.scoring import Scoring
    from steadyrank.serve.server.http.segments import SegmentRouting
    from steadyrank.serve.server.http.services import Services


@dataclass(frozen=True)
class AppParts:
    """The components (``services``), the accepted keys, the admission state (``gate``), the
    gateway to the components, the scoring paths, the readiness cache and the segments' routes."""

    services: Services
    keys: Keys
    gate: Gate
    gateway: Gateway
    scoring: Scoring
    ready: ReadyCache
    segments: SegmentRouting


def parts_of(request: Request) -> AppParts:
    """The :class:`AppParts` of the application serving ``request``."""
    return request.app.state.parts

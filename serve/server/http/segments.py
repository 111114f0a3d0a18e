"""Per-segment routing of ``/v1/search`` at the HTTP edge (docs/guides/quality.md "Per-segment
verdicts and guards").

A request's segment is its ``quality.segments.header`` value (validated by
:func:`~serve.server.quality.segments.segment_name`: length first, then the pattern; a bad value is
refused with 400 before any model work). Which reranker serves it:

1. the segment's reranker bypass is on (``rerank_guard`` and the shadow evaluator found the reranker
   losing to the first stage there) → no reranker: the first stage's order;
2. the canary is configured, ``canary_share`` > 0, and the segment is not refused (``harm_guard``
   and the canary's segment verdict is ``rollback``) → the canary with probability ``canary_share``;
3. otherwise the primary.

The refused and bypassed segments come from the shadow evaluator (``segment_routes``), fetched off
the request path at most every ``refresh_s`` seconds (a request that finds them older starts one
detached refresh and is routed by what is held; a failed refresh keeps what is held). Each request
is counted in ``steadyrank_segment_requests_total{segment, route}`` under its tracked segment name
(:class:`~serve.server.quality.segments.SegmentRegistry`: excess names count as ``other``).
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

from starlette.requests import Request

from steadyrank.serve.errors import InvalidInputError
from steadyrank.serve.server.calls import Variant
from steadyrank.serve.server.quality.segments import SegmentRegistry, segment_name
from steadyrank.serve.settings import Settings
from steadyrank.serve.telemetry import Recorder

logger = logging.getLogger("steadyrank.quality")


class SegmentRouting:
    """The HTTP edge's view of the segments' routes (module docstring)."""

    def __init__(self, settings: Settings, recorder: Recorder) -> None:
        self.settings = settings.quality.segments
        self.canary = settings.canary is not None
        self.recorder = recorder
        self.registry = SegmentRegistry(self.settings.max_segments)
        self.refused: frozenset[str] = frozenset()
        self.bypassed: frozenset[str] = frozenset()
        self.fetched_at = float("-inf")
        self.refreshing = False
        self.rng = random.Random()

    def segment(self, request: Request) -> str:
        """The request's segment name; :class:`InvalidInputError` (400) for a malformed header."""
        try:
            return segment_name(request.headers.get(self.settings.header), self.settings.max_length)
        except ValueError as exc:
            raise InvalidInputError(f"{self.settings.header}: {exc}") from None

    def route(self, segment: str) -> tuple[Variant, bool]:
        """(variant, rerank) for a request of ``segment``, counted by its tracked name."""
        rerank = segment not in self.bypassed
        variant: Variant = "primary"
        if rerank and self.canary and segment not in self.refused and self.rng.random() < self.settings.canary_share:
            variant = "canary"
        route = variant if rerank else "first_stage"
        self.recorder.inc("steadyrank_segment_requests_total", segment=self.registry.track(segment), route=route)
        return variant, rerank

    def stale(self) -> bool:
        """Whether a refresh is due: a guard is on, none is running, and the routes are ``refresh_s`` old."""
        guarded = self.settings.harm_guard or self.settings.rerank_guard
        return guarded and not self.refreshing and time.monotonic() - self.fetched_at >= self.settings.refresh_s

    async def refresh(self, evaluator: Any) -> None:
        """Fetch the refused and bypassed segments from the shadow evaluator; keep what is held on failure."""
        self.refreshing = True
        try:
            routes = await evaluator.segment_routes.remote()
            self.refused, self.bypassed = frozenset(routes["refused"]), frozenset(routes["bypassed"])
        except Exception as exc:  # noqa: BLE001 - routing goes on with the routes held
            logger.warning("segment routes not refreshed: %s: %s", type(exc).__name__, exc)
        finally:
            self.fetched_at = time.monotonic()
            self.refreshing = False

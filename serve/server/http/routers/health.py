"""``GET /healthz`` (alive), ``GET /readyz`` (ready to serve) and ``GET /metrics`` (Prometheus).

``/readyz``: 200 ``ready`` when the models, the index and the metrics hub answer; ``degraded`` when a
deployment has fewer RUNNING replicas than replicas (200 while each keeps one running, else 503) or
a node listed alive does not answer (503); ``draining`` (503) during shutdown; ``not_ready`` (503)
otherwise. The checks behind it are asked at most once per ``READY_CACHE_S`` seconds per replica
(a probe storm costs one fan-out); an answer is served while its checks began at most
``READY_CACHE_S`` ago. A caller without a valid key (when keys are configured) gets only the
status: the checks name paths, models and internal errors.

Bound: a replica whose process died is reported (``degraded``, 503 when it was its deployment's last
running one) by every ``/readyz`` that arrives more than ``DEAD_REPLICA_BOUND_S`` after the death:
``READY_CACHE_S`` for the cached answer plus up to 1 s for the GCS to hear of the exit from the
node's raylet (:mod:`serve.server.hosting.health`, "dead replica"), until the controller reports the
replacement RUNNING.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from steadyrank.serve.server.calls import Deadline
from steadyrank.serve.server.http import schemas
from steadyrank.serve.server.http.deps import Role, authorised, caller_role, endpoint
from steadyrank.serve.server.http.gateway import SIDE_CALL_TIMEOUT_S, root_cause
from steadyrank.serve.server.http.responses import JSON
from steadyrank.serve.server.http.state import parts_of

logger = logging.getLogger("steadyrank.http")
router = APIRouter()

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
READY_CACHE_S = 1.0
DEAD_REPLICA_BOUND_S = READY_CACHE_S + 1.0


@router.get("/healthz", response_model=schemas.HealthResponse, tags=["health"])
async def healthz() -> dict[str, str]:
    """Alive (the ingress answers)."""
    return {"status": "ok"}


class ReadyCache:
    """The last readiness answer ``(status, checks, code)`` and when its checks began."""

    def __init__(self) -> None:
        self.answer: tuple[schemas.ReadyStatus, dict[str, Any], int] | None = None
        self.at = 0.0
        self.lock = asyncio.Lock()

    async def get(self, request: Request) -> tuple[schemas.ReadyStatus, dict[str, Any], int]:
        async with self.lock:  # concurrent probes wait for the one fan-out in progress
            if self.answer is None or time.monotonic() - self.at > READY_CACHE_S:
                began = time.monotonic()  # the answer's age counts from here: what it saw is at most that old
                self.answer = await _readiness(request)
                self.at = began
            return self.answer


async def _readiness(request: Request) -> tuple[schemas.ReadyStatus, dict[str, Any], int]:
    services = parts_of(request).services
    health = None
    if services.health is not None:
        try:
            health = await services.health()
        except Exception:  # noqa: BLE001 — the controller is unreachable: the checks below decide
            health = None
    if health is not None and not health.healthy:
        checks = {"replicas": health.degraded, **({"lost_nodes": health.lost_nodes} if health.lost_nodes else {})}
        return "degraded", checks, 200 if health.serving else 503
    try:
        checks = await asyncio.wait_for(services.searcher.ready.remote(), timeout=10.0)
        checks["metrics_hub"] = await asyncio.wait_for(services.hub.ready.remote(), timeout=5.0)
        if services.evaluator is not None:
            checks["evaluator"] = {"configured": True}
    except Exception as exc:  # noqa: BLE001
        if services.host.lost(exc):  # a replica died before the controller marked it: degraded, being replaced
            return "degraded", {"replicas": {"lost": type(root_cause(exc)).__name__}}, 503
        logger.warning("not ready: %s: %s", type(root_cause(exc)).__name__, root_cause(exc))
        return "not_ready", {"error": type(root_cause(exc)).__name__}, 503
    return "ready", checks, 200


@router.get("/readyz", response_model=schemas.ReadyResponse, tags=["health"],
            responses={503: {"model": schemas.ReadyResponse}})
async def readyz(request: Request, role: Annotated[Role | None, Depends(caller_role)]) -> Response:
    """Ready: models loaded, index loaded, metrics hub reachable (503 otherwise); see the module
    docstring for degraded and draining. The checks only for a caller with a valid key."""
    if parts_of(request).gate.draining:
        status, checks, code = "draining", {"draining": True}, 503
    else:
        status, checks, code = await parts_of(request).ready.get(request)
    return JSON(schemas.ReadyResponse(status=status, checks=checks if role is not None else {}).model_dump(),
                status_code=code)


def _protect(request: Request) -> None:
    if parts_of(request).services.settings.auth.protect_metrics:
        authorised(request)


@router.get("/metrics", tags=["health"], response_class=Response,
            dependencies=[Depends(endpoint("metrics", record=False)), Depends(_protect)])
async def metrics(request: Request) -> Response:
    """Prometheus text exposition of every replica's metrics (through the metrics hub)."""
    hub = parts_of(request).services.hub
    body = await parts_of(request).gateway.call(Deadline.after(SIDE_CALL_TIMEOUT_S), lambda: hub.render.remote())
    return Response(content=body, media_type=PROMETHEUS_CONTENT_TYPE)

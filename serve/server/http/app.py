"""``create_app(services) -> FastAPI``: the whole HTTP layer, built around given components.

The Ray Serve ``Ingress`` deployment mounts it (:mod:`serve.server.hosting.ingress`); the in-process tests
(tests/http) build it around fake components and call it with an HTTP client, without Ray.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from steadyrank.serve import tracing
from steadyrank.serve.errors import (
    ErrorKind,
    MethodNotAllowedError,
    NotFoundError,
    SteadyrankError,
)
from steadyrank.serve.server.admission.gate import Gate
from steadyrank.serve.server.http.deps import Keys
from steadyrank.serve.server.http.dialects import schema_limits, tei
from steadyrank.serve.server.http.errors import render, schema_error
from steadyrank.serve.server.http.gateway import Gateway
from steadyrank.serve.server.http.middleware import RequestContext, _path
from steadyrank.serve.server.http.routers import cohere, health, native, quality
from steadyrank.serve.server.http.routers import tei as tei_router
from steadyrank.serve.server.http.scoring import Scoring
from steadyrank.serve.server.http.segments import SegmentRouting
from steadyrank.serve.server.http.services import Services
from steadyrank.serve.server.http.state import AppParts, parts_of

logger = logging.getLogger("steadyrank.http")


def create_app(services: Services) -> FastAPI:
    """The FastAPI application serving ``services`` (routes, middleware, error handlers, the OpenAPI
    schema with the running limits). Its ``state.parts`` (:class:`~serve.server.http.state.AppParts`)
    holds ``services``, ``keys``, ``gate`` (admission), ``gateway``, ``scoring``, the readiness
    cache ``ready`` and the segments' routes ``segments``."""
    settings = services.settings
    limits = settings.limits
    tracing.configure(settings.server.tracing)
    app = FastAPI(title="steadyrank",
                  description="Reranking middleware with High-Precision Scoring, tie facts and dynamic-K search.",
                  version="0.1.0", **_native_tracing_off())
    gate = Gate.from_settings(settings.admission)
    gateway = Gateway(services, gate)
    app.state.parts = AppParts(services=services, keys=Keys.from_settings(settings.auth), gate=gate, gateway=gateway,
                               scoring=Scoring(services, gateway), ready=health.ReadyCache(),
                               segments=SegmentRouting(settings, services.recorder))
    for router in (native.router, cohere.router, tei_router.router, health.router, quality.router):
        app.include_router(router)
    model_of = {"rerank": services.names.reranker[0], "rerank_v2": services.names.reranker[0],
                "rerank_tei": services.names.reranker[0], "embeddings": services.names.embedder[0],
                "embed_tei": services.names.embedder[0], "search": "pipeline"}
    app.add_middleware(RequestContext, model_of=model_of)
    _install_error_handlers(app)
    values = schema_limits.contract_values(limits, services.names)
    values["max_chunks_per_doc"] = settings.chunking.max_chunks_per_doc
    values["truncation_directions"] = [*tei.directions(settings.reranker_model.truncation_side), None]
    schema_limits.install(app, values)
    return app


def _native_tracing_off() -> dict[str, Any]:
    """FastAPI's own spans off (FastAPI ≥ 0.16x traces every request whenever the process has a
    tracer provider): steadyrank's request span (:mod:`serve.tracing`) is the only server span,
    and with ``server.tracing`` off there is none."""
    return {"telemetry": {"tracing": False}} if "telemetry" in inspect.signature(FastAPI.__init__).parameters else {}


def _request_id(request: Request) -> str | None:
    return getattr(request.state, "request_id", None)


def _install_error_handlers(app: FastAPI) -> None:
    """Every error becomes the body of its kind in the route's dialect (:mod:`serve.server.http.errors`);
    an overload 503 of a scoring route is first paced (:class:`~serve.server.admission.pacing.RefusalPacer`)."""

    @app.exception_handler(SteadyrankError)
    async def domain(request: Request, exc: SteadyrankError) -> JSONResponse:
        if exc.kind is ErrorKind.OVERLOADED and getattr(request.state, "record", False):
            wait = parts_of(request).gate.pacer.wait(time.monotonic())
            if wait > 0:
                await asyncio.sleep(wait)
        return render(exc, _request_id(request), getattr(request.state, "dialect", "native"))

    @app.exception_handler(RequestValidationError)
    async def validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return render(schema_error(exc), _request_id(request), getattr(request.state, "dialect", "native"))

    @app.exception_handler(StarletteHTTPException)
    async def http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code in (404, 405):
            logger.debug("%s %s: %s", request.method, _path(request.scope), exc.status_code)
            error: SteadyrankError
            if exc.status_code == 404:
                error = NotFoundError(f"Not Found: {request.method} {_path(request.scope)}")
            else:
                error = MethodNotAllowedError(f"Method Not Allowed: {request.method} {_path(request.scope)}")
            response = render(error, _request_id(request))
            if exc.status_code == 405 and exc.headers:
                response.headers.update(exc.headers)
            return response
        from steadyrank.serve.errors import InvalidInputError

        return render(InvalidInputError(str(exc.detail)), _request_id(request))


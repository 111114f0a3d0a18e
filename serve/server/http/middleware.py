"""The ASGI middleware around every route: the request id, the arrival time, the answer to an
untyped exception, and the request metrics.

- ``X-Request-Id``: the client's (when safe, :func:`~serve.server.http.request_ids.request_id_of`) or a new one; held in
  ``request.state.request_id`` and the log context for the request, sent back as a header (by Ray
  Serve's own HTTP server when it fronts the app: it puts the client's id, or one it made, in the
  request's headers and echoes it; ``Services.echoes_request_id``);
- ``request.state.arrived``: ``time.monotonic()`` at arrival (the body's read deadline counts from it);
- an exception no handler mapped (a bug): its traceback is logged once under the request id and the
  client gets a JSON 500 naming only the request id;
- the request's OpenTelemetry span, when tracing is on (:mod:`serve.tracing`);
- a scoring route's outcome: ``steadyrank_requests_total{endpoint, code, model}`` and
  ``steadyrank_request_duration_seconds{endpoint, model}``; ``steadyrank_in_flight_requests`` is set
  as requests start and end.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from steadyrank.serve import tracing
from steadyrank.serve.server.http.context import current_request_id
from steadyrank.serve.server.http.errors import internal_error
from steadyrank.serve.server.http.request_ids import REQUEST_ID_HEADER, request_id_of

logger = logging.getLogger("steadyrank.http")


class RequestContext:
    """See the module docstring. ``model_of``: the ``model`` label of each scoring endpoint."""

    def __init__(self, app: ASGIApp, model_of: dict[str, str]) -> None:
        self.app = app
        self.model_of = model_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        state = scope.setdefault("state", {})
        state["arrived"] = time.monotonic()
        header = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == REQUEST_ID_HEADER.encode()), None)
        request_id = request_id_of(header)
        state["request_id"] = request_id
        token = current_request_id.set(request_id)
        status: list[int] = []

        echoed = scope["app"].state.parts.services.echoes_request_id

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            if message["type"] == "http.response.start" and not echoed:
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"]
                message = {**message, "headers": [*headers, (b"x-request-id", request_id.encode())]}
            await send(message)

        method = scope.get("method", "")
        with tracing.request_span(scope) as span:
            try:
                await self.app(scope, receive, send_with_id)
            except Exception:
                logger.exception("unhandled error on %s %s", method, _path(scope))
                if status:  # the response had started: nothing more can be said to the client
                    raise
                dialect = state.get("dialect", "native")
                await internal_error(request_id, dialect)(scope, receive, send_with_id)
            finally:
                current_request_id.reset(token)
                code = status[0] if status else 500
                self._record(state, code, time.perf_counter() - started, scope)
                route = scope.get("route")
                tracing.end_request(span, method, getattr(route, "path", None), code, request_id)

    def _record(self, state: dict[str, Any], code: int, seconds: float, scope: Scope) -> None:
        name = state.get("endpoint")
        if name is None or not state.get("record"):
            return
        services = scope["app"].state.parts.services
        model = self.model_of.get(name, "")
        services.recorder.inc("steadyrank_requests_total", endpoint=name, code=str(code), model=model)
        services.recorder.observe("steadyrank_request_duration_seconds", seconds, endpoint=name, model=model)


def _path(scope: Scope) -> str:
    """The request path as it came (still percent-encoded, control characters escaped): safe in a log line."""
    raw = scope.get("raw_path") or scope.get("path", "").encode("utf-8", "backslashreplace")
    return raw.decode("ascii", "backslashreplace")[:256]

"""Ray Serve's HTTP proxy answers its own failures in steadyrank's error shape: JSON, 503, ``Retry-After``.

Every answer of the application itself is JSON (:mod:`serve.server.http.errors`), but some requests are
answered by Ray Serve's proxy, in front of the Ingress replicas, without reaching the application:

- the Ingress replica a request was sent to dies, or its node is lost, while the request is in
  flight (``ActorDiedError``, ``ActorUnavailableError``): the proxy sends nothing and its HTTP
  server (uvicorn) answers ``500 Internal Server Error`` in plain text. A client cannot tell that
  from a bug, and retries nothing;
- no Ingress replica can take the request (``DeploymentUnavailableError``) or the proxy's queue is
  full (``BackPressureError``): the proxy answers 503 in plain text (``Retry-After`` only for the
  second).

:class:`ProxyErrors`, an ASGI middleware the proxy runs around itself, answers the first with a JSON
503 ``unavailable_error`` and ``Retry-After`` (the request was lost with its replica: a repeat is
served by another or a replacement replica), and gives the second the same shape, keeping Ray's
message and its ``Retry-After``. Every other answer, the application's included, passes untouched
(the application's errors are JSON already; a non-JSON answer is touched only when it is a 503,
which the application never sends in any other shape).

Ray Serve installs it in every HTTP proxy (and every direct-ingress replica server) through
``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH`` = ``steadyrank.serve.server.hosting.proxy_errors:middlewares``
(:data:`serve.launcher.ray_env.RAY_ENV_DEFAULTS`: set by
``steadyrank serve``; for ``serve deploy`` in the environment of ``ray start`` on every node, which
``deploy/kuberay/rayservice.yaml`` does). The proxy does not know the application's settings, so its
``Retry-After`` is :data:`RETRY_AFTER_S`, the default of ``limits.retry_after_s``.
"""

from __future__ import annotations

import json
import logging

from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from steadyrank.serve.errors import ErrorKind
from steadyrank.serve.server.http.errors import error_body, status_of
from steadyrank.serve.server.http.request_ids import REQUEST_ID_HEADER, request_id_of

logger = logging.getLogger("steadyrank.proxy")

#: ``Retry-After`` of the proxy's answers (s): the default of ``limits.retry_after_s`` (a test holds them equal;
#: the settings are not imported here, to keep the proxy's process lean)
RETRY_AFTER_S = 1
#: the message of a request lost with the replica serving it
LOST_MESSAGE = ("the replica serving this request was lost (its process or node stopped) before it answered; "
                "retry: another replica serves the repeat")
#: status of Ray's own plain-text answers that are rewritten (the application's 503s are always JSON)
RAY_UNAVAILABLE = 503


def middlewares() -> list[Middleware]:
    """Ray Serve's proxy callback: the middlewares it wraps itself in."""
    return [Middleware(ProxyErrors)]


class ProxyErrors:
    """See the module docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started: list[Message] = []  # the response's start, once sent (or held back)
        held: list[Message] = []  # Ray's own plain-text error start, held back until its body ends

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                started.append(message)
                if message["status"] == RAY_UNAVAILABLE and not _is_json(message):
                    held.append(message)
                    return
            elif held and message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                await _answer(send, scope, held[0], _text(message))
                return
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception:  # noqa: BLE001 - the proxy failed before it answered: still a JSON answer
            if started:
                raise
            logger.exception("the HTTP proxy failed on %s %s", scope.get("method"), scope.get("path"))
        if not started:  # the proxy answered nothing: the replica serving the request was lost
            await _answer(send, scope, None, LOST_MESSAGE)


def _header(headers: list, name: bytes) -> bytes | None:
    return next((bytes(v) for k, v in headers if bytes(k).lower() == name), None)


def _is_json(start: Message) -> bool:
    content_type = _header(start.get("headers", []), b"content-type") or b""
    return content_type.split(b";")[0].strip().lower() == b"application/json"


def _text(body: Message) -> str:
    return bytes(body.get("body", b""))[:512].decode("utf-8", "replace").strip()


async def _answer(send: Send, scope: Scope, ray_start: Message | None, message: str) -> None:
    """A JSON 503 ``unavailable`` with ``Retry-After`` (Ray's own when its answer had one) and the
    request's id (Ray's proxy puts one in the request's headers)."""
    retry_after = (_header(ray_start.get("headers", []), b"retry-after") if ray_start is not None else None) \
        or str(RETRY_AFTER_S).encode()
    header = _header(scope.get("headers", []), REQUEST_ID_HEADER.encode())
    request_id = request_id_of(header.decode("latin-1") if header is not None else None)
    kind = ErrorKind.UNAVAILABLE
    body = json.dumps(error_body(kind, message or LOST_MESSAGE, request_id)).encode()
    await send({"type": "http.response.start", "status": status_of(kind),
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"retry-after", retry_after), (REQUEST_ID_HEADER.encode(), request_id.encode())]})
    await send({"type": "http.response.body", "body": body})

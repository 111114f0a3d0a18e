"""Route dependencies: the API key, and the admitted body of a scoring request.

Order of a scoring request (every step answers before the next costs anything):

1. the API key (constant time over every configured key; 401);
2. refusal before the body (:func:`~serve.server.admission.early.early_refusal`: the server drains,
   this replica has ``admission.max_in_flight`` requests in flight, or the endpoint's model has so
   much work queued that the units the ``Content-Length`` holds would be refused; 503);
3. the body, read under a size cap (413) and a read deadline measured from the request's arrival
   (``limits.body_timeout_s``; 408): a slowly sent body holds no slot; then its JSON values counted
   before it is parsed (``limits.max_body_values``; 413);
4. an in-flight slot, taken once the body is read (503 when the replicas's slots filled meanwhile),
   held until the handler returns.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NoReturn, TypeVar

from fastapi import APIRouter, Depends
from pydantic import BaseModel
from starlette.requests import Request

from steadyrank.serve.errors import (
    EmptyInputError,
    InputTooLongError,
    ReadTimeoutError,
    UnauthorisedError,
)
from steadyrank.serve.server.admission.early import Refusal, early_refusal
from steadyrank.serve.server.admission.gate import Work
from steadyrank.serve.server.http.gateway import arrival, declared_size
from steadyrank.serve.server.http.jsonscan import json_values
from steadyrank.serve.server.http.responses import body_schema
from steadyrank.serve.server.http.state import parts_of

Role = Literal["open", "user", "admin"]
_Handler = TypeVar("_Handler", bound=Callable[..., Coroutine[Any, Any, Any]])

#: The model deployment each scoring endpoint sends all its work to, for refusing before the body is
#: read. ``rerank_tei`` is left out: its error shape (TEI or Infinity) is known only from its body.
MODEL_OF_ENDPOINT = {"rerank": "reranker", "rerank_v2": "reranker", "embeddings": "embedder", "embed_tei": "embedder"}


@dataclass(frozen=True)
class Keys:
    """The accepted bearer keys; ``admin`` ones are accepted everywhere and may do more
    (``X-Golden-Query-Id`` for any query). No key at all = every route open."""

    user: tuple[bytes, ...]
    admin: tuple[bytes, ...] = ()

    @classmethod
    def from_settings(cls, auth: Any) -> Keys:
        admin = tuple(k.encode("utf-8") for k in auth.resolved_admin_keys())
        return cls(tuple(k.encode("utf-8") for k in auth.resolved_keys()), admin)

    @property
    def open(self) -> bool:
        return not self.user and not self.admin

    def role(self, authorization: str | None) -> Role | None:
        """The role of an ``Authorization`` header (None: refused). Every key is compared, in
        constant time, whatever matches."""
        if self.open:
            return "open"
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        presented = token.strip().encode("utf-8")
        user = admin = False
        for key in self.user:
            user |= hmac.compare_digest(presented, key)
        for key in self.admin:
            admin |= hmac.compare_digest(presented, key)
        return "admin" if admin else "user" if user else None


def authorised(request: Request) -> Role:
    """Dependency: the caller's role; 401 without a valid key (when keys are configured)."""
    keys: Keys = parts_of(request).keys
    header = request.headers.get("authorization")
    role = keys.role(header)
    if role is None:
        scheme, _, token = (header or "").partition(" ")
        missing = scheme.lower() != "bearer" or not token.strip()
        raise UnauthorisedError("missing API key: send 'Authorization: Bearer <key>'" if missing else "invalid API key")
    return role


def caller_role(request: Request) -> Role | None:
    """Dependency: the caller's role, or None (no 401: the route answers less instead)."""
    return parts_of(request).keys.role(request.headers.get("authorization"))


def endpoint(name: str, dialect: str = "native", record: bool = True) -> Callable[[Request], None]:
    """Dependency: names the route for the request metrics and its error dialect (``request.state``)."""

    def mark(request: Request) -> None:
        request.state.endpoint = name
        request.state.dialect = dialect
        request.state.record = record

    return mark


def refusal(request: Request, name: str) -> Refusal | None:
    """Why a new request to the scoring endpoint ``name`` ("": none, only the slots are checked) is
    refused before its body is read, or None (:func:`~serve.server.admission.early.early_refusal`)."""
    app = parts_of(request)
    settings = app.services.settings
    return early_refusal(app.gate, settings.admission, settings.limits, work_before_body(request, name),
                         lambda: app.gateway.timeout_s(request))


def work_before_body(request: Request, name: str) -> Work | None:
    """The work the scoring endpoint ``name`` will be admitted as, estimated before its body is read
    (None: not known from the headers)."""
    app = parts_of(request)
    if name == "search":
        return app.scoring.search_work
    model = MODEL_OF_ENDPOINT.get(name)
    return None if model is None else app.gate.sized_work(model, declared_size(request))


async def read_body(request: Request, limit: int, ends: float) -> bytes:
    """The body, at most ``limit`` bytes (413 beyond), whole before ``ends`` (``time.monotonic``;
    408 after)."""
    declared = declared_size(request)
    if declared is not None and declared > limit:
        raise InputTooLongError(f"request body of {declared} bytes exceeds the limit of {limit} bytes")

    async def read() -> bytes:
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise InputTooLongError(f"request body exceeds the limit of {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    try:
        body = await asyncio.wait_for(read(), timeout=max(0.0, ends - time.monotonic()))
    except asyncio.TimeoutError:
        raise ReadTimeoutError("the request body did not arrive within the read deadline") from None
    if not body or body.isspace():  # no stripped copy of the body
        raise EmptyInputError("request body is empty: send a JSON object")
    return body


async def check_values(body: bytes, limit: int) -> None:
    """At most ``limit`` JSON values in ``body`` (``limits.max_body_values``; 413 beyond), counted
    before it is parsed (:mod:`~serve.server.http.jsonscan`): on a worker thread, and only for a body of
    ``limit`` bytes or more (a body holds at most one value a byte)."""
    if len(body) < limit:
        return
    values = await asyncio.to_thread(json_values, body)
    if values > limit:
        raise InputTooLongError(f"request body holds {values} JSON values, more than the limit of {limit} "
                                "(array elements and object members)")


async def admitted_body(request: Request) -> AsyncIterator[bytes]:
    """Dependency of a scoring route (:func:`scoring_post`): its body, read after the checks of the
    module docstring, with an in-flight slot held until the handler returns. The route's name comes
    from its ``endpoint`` dependency, which FastAPI solves first (a route's own ``dependencies``
    precede its parameters')."""
    app = parts_of(request)
    gate, limits, recorder = app.gate, app.services.settings.limits, app.services.recorder

    def drop(refused: Refusal) -> NoReturn:
        recorder.inc("steadyrank_requests_dropped_total", deployment="ingress", reason=refused.reason)
        raise refused.error

    refused = refusal(request, request.state.endpoint)
    if refused is not None:
        drop(refused)
    body = await read_body(request, limits.max_body_bytes, arrival(request) + limits.body_timeout_s)
    await check_values(body, limits.max_body_values)
    refused = refusal(request, "")  # the slots filled while the body arrived
    if refused is not None:
        drop(refused)
    gate.in_flight += 1
    recorder.set("steadyrank_in_flight_requests", gate.in_flight)
    try:
        yield body
    finally:
        gate.in_flight -= 1
        recorder.set("steadyrank_in_flight_requests", gate.in_flight)


#: A scoring handler's body parameter: ``raw: AdmittedBody``.
AdmittedBody = Annotated[bytes, Depends(admitted_body)]


def scoring_post(router: APIRouter, path: str, name: str, request_model: type[BaseModel], response_model: Any,
                 responses: dict[int | str, dict[str, Any]], *, tags: str = "scoring", dialect: str = "native",
                 openapi_extra: dict[str, Any] | None = None) -> Callable[[_Handler], _Handler]:
    """The decorator of a scoring route: ``POST path`` named ``name`` (request metrics, error
    ``dialect``), the API key checked, the OpenAPI body from ``request_model`` (or
    ``openapi_extra``); the handler takes its body as ``raw: AdmittedBody``."""
    return router.post(path, tags=[tags], openapi_extra=openapi_extra or body_schema(request_model),
                       response_model=response_model, responses=responses,
                       dependencies=[Depends(endpoint(name, dialect)), Depends(authorised)])

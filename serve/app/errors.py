"""The one map from an error's kind (:class:`~serve.runtime.errors.ErrorKind`) to its HTTP status
and to each client dialect's error body (docs/ARCHITECTURE.md, "Error model").

| kind | status | steadyrank ``type`` | TEI ``error_type`` |
|---|---|---|---|
| ``invalid_input`` | 400 | ``invalid_request_error`` | ``validation`` |
| ``empty_input`` | 400 | ``invalid_request_error`` | ``empty`` |
| ``schema`` | 422 | ``validation_error`` | ``validation`` |
| ``input_too_long`` | 413 | ``payload_too_large`` | ``validation`` |
| ``unauthorised`` | 401 | ``authentication_error`` | ``unauthorized`` |
| ``not_found`` | 404 | ``not_found_error`` | ``not_found`` |
| ``method_not_allowed`` | 405 | ``method_not_allowed`` | ``not_found`` |
| ``read_timeout`` | 408 | ``timeout_error`` | ``validation`` |
| ``overloaded`` | 503 + ``Retry-After`` | ``overloaded_error`` | ``overloaded`` |
| ``unavailable``, ``shard_unavailable`` | 503 | ``unavailable_error`` | ``overloaded`` |
| ``deadline_exceeded`` | 504 | ``timeout_error`` | ``backend`` |
| ``internal`` (any untyped exception) | 500 | ``internal_error`` | ``backend`` |

steadyrank's body (every native route, Cohere, Infinity, OpenAI shapes):
``{"error": {"type", "message", "request_id"}}``; TEI's (``POST /embed``, TEI bodies on
``POST /rerank``): ``{"error", "error_type", "request_id"}``. A 500 says only "internal error" and
the request id: the traceback is logged once, server side, under that id.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi.responses import JSONResponse
from pydantic import ValidationError

from steadyrank.serve.runtime.errors import ErrorKind, SchemaError, SteadyrankError

Dialect = Literal["native", "tei"]

_K = ErrorKind
#: kind → (HTTP status, steadyrank's error type, TEI's error type)
KINDS: dict[ErrorKind, tuple[int, str, str]] = {
    _K.INVALID_INPUT: (400, "invalid_request_error", "validation"),
    _K.EMPTY_INPUT: (400, "invalid_request_error", "empty"),
    _K.SCHEMA: (422, "validation_error", "validation"),
    _K.INPUT_TOO_LONG: (413, "payload_too_large", "validation"),
    _K.UNAUTHORISED: (401, "authentication_error", "unauthorized"),
    _K.NOT_FOUND: (404, "not_found_error", "not_found"),
    _K.METHOD_NOT_ALLOWED: (405, "method_not_allowed", "not_found"),
    _K.READ_TIMEOUT: (408, "timeout_error", "validation"),
    _K.OVERLOADED: (503, "overloaded_error", "overloaded"),
    _K.UNAVAILABLE: (503, "unavailable_error", "overloaded"),
    _K.SHARD_UNAVAILABLE: (503, "unavailable_error", "overloaded"),
    _K.DEADLINE_EXCEEDED: (504, "timeout_error", "backend"),
    _K.INTERNAL: (500, "internal_error", "backend"),
}

INTERNAL_MESSAGE = "internal error (the server logged it under this request id)"


def status_of(kind: ErrorKind) -> int:
    return KINDS[kind][0]


def headers_of(error: SteadyrankError) -> dict[str, str]:
    """``Retry-After`` when the error carries one; ``WWW-Authenticate`` on 401."""
    headers = {}
    if error.retry_after_s is not None:
        headers["Retry-After"] = str(int(error.retry_after_s))
    if error.kind is ErrorKind.UNAUTHORISED:
        headers["WWW-Authenticate"] = 'Bearer realm="steadyrank"'
    return headers


def error_body(kind: ErrorKind, message: str, request_id: str | None, dialect: Dialect = "native") -> dict[str, Any]:
    """The JSON body of an error of ``kind`` in ``dialect``'s shape."""
    _, native, tei = KINDS[kind]
    if dialect == "tei":
        return {"error": message, "error_type": tei, "request_id": request_id}
    return {"error": {"type": native, "message": message, "request_id": request_id}}


def render(error: SteadyrankError, request_id: str | None, dialect: Dialect = "native") -> JSONResponse:
    """``error`` as the response its kind maps to."""
    return JSONResponse(error_body(error.kind, error.message, request_id, dialect), status_code=status_of(error.kind),
                        headers=headers_of(error))


def internal_error(request_id: str | None, dialect: Dialect = "native") -> JSONResponse:
    """The 500 of an untyped exception: the request id and no internal text."""
    return JSONResponse(error_body(ErrorKind.INTERNAL, INTERNAL_MESSAGE, request_id, dialect), status_code=500)


def _loc(loc: tuple[Any, ...]) -> str:
    """``("documents", 3, "text")`` → ``documents[3].text``; FastAPI's leading ``body`` is dropped."""
    parts = list(loc)
    if parts and parts[0] == "body":
        parts = parts[1:]
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "body"


def schema_error(exc: ValidationError | Any) -> SteadyrankError:
    """A pydantic/FastAPI validation error as a schema error naming every bad field (an invalid-input
    error for a body that is not JSON)."""
    from steadyrank.serve.runtime.errors import InvalidInputError

    errors = exc.errors() if hasattr(exc, "errors") else []
    if any(e.get("type") in ("json_invalid", "json_type") for e in errors):
        first = next(e for e in errors if e.get("type") in ("json_invalid", "json_type"))
        return InvalidInputError(f"request body is not valid JSON: {first.get('msg', '')}".rstrip(": "))
    messages = []
    for error in errors[:10]:
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        messages.append(f"{_loc(tuple(error.get('loc', ())))}: {message}")
    more = f" (and {len(errors) - 10} more)" if len(errors) > 10 else ""
    return SchemaError("; ".join(messages) + more if messages else "request does not match the schema")

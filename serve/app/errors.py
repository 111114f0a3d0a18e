"""HTTP errors: every failure is JSON ``{"error": {"type": ..., "message": ...}}`` with its status code.

| status | type | when |
|---|---|---|
| 400 | ``invalid_request_error`` | empty query or documents, malformed JSON, bad values the schema cannot express |
| 401 | ``authentication_error`` | missing or wrong bearer API key |
| 404 | ``not_found_error`` | unknown route, unknown model, no canary configured |
| 413 | ``payload_too_large`` | body too big, too many documents/inputs, a document or query too long |
| 422 | ``validation_error`` | request does not match the schema; the message names the field |
| 503 | ``overloaded_error`` / ``unavailable_error`` | queue full (with ``Retry-After``), not ready, an index shard did not answer |
| 504 | ``timeout_error`` | the request ran past its deadline |
| 500 | ``internal_error`` | a bug; the replica keeps serving |
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse
from pydantic import ValidationError


class ApiError(Exception):
    """An error answered to the client as JSON."""

    status = 500
    type = "internal_error"

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = headers or {}

    def response(self) -> JSONResponse:
        return error_response(self.status, self.type, self.message, self.headers)


class BadRequest(ApiError):
    status, type = 400, "invalid_request_error"


class Unauthorized(ApiError):
    status, type = 401, "authentication_error"

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"WWW-Authenticate": 'Bearer realm="steadyrank"'})


class NotFound(ApiError):
    status, type = 404, "not_found_error"


class PayloadTooLarge(ApiError):
    status, type = 413, "payload_too_large"


class SchemaError(ApiError):
    status, type = 422, "validation_error"


class Overloaded(ApiError):
    status, type = 503, "overloaded_error"

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message, headers={"Retry-After": str(int(retry_after_s))})


class Unavailable(ApiError):
    status, type = 503, "unavailable_error"


class ShuttingDown(Overloaded):
    """The server drains for shutdown: 503 with ``Retry-After`` (a restarted server, or another
    node behind the load balancer, will answer)."""

    type = "unavailable_error"


class Timeout(ApiError):
    status, type = 504, "timeout_error"


def error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"error": {"type": error_type, "message": message}}


def error_response(status: int, error_type: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(error_type, message), status_code=status, headers=headers)


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


def schema_error(exc: ValidationError | Any) -> ApiError:
    """A pydantic/FastAPI validation error as a 422 naming every bad field (400 for broken JSON)."""
    errors = exc.errors() if hasattr(exc, "errors") else []
    if any(e.get("type") in ("json_invalid", "json_type") for e in errors):
        first = next(e for e in errors if e.get("type") in ("json_invalid", "json_type"))
        return BadRequest(f"request body is not valid JSON: {first.get('msg', '')}".rstrip(": "))
    messages = []
    for error in errors[:10]:
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        messages.append(f"{_loc(tuple(error.get('loc', ())))}: {message}")
    more = f" (and {len(errors) - 10} more)" if len(errors) > 10 else ""
    return SchemaError("; ".join(messages) + more if messages else "request does not match the schema")

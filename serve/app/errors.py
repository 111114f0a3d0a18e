"""The one map from an error's kind (:class:`~serve.runtime.errors.ErrorKind`) to its HTTP status
and to each client dialect's error body (docs/ARCHITECTURE.md, "Error model").

The table is :data:`_TABLE` below (one row a kind; an untyped exception is ``internal``; an
``overloaded`` error also carries ``Retry-After``).

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

#: One row a kind: kind, HTTP status, steadyrank's error ``type``, TEI's ``error_type``.
_TABLE = """
invalid_input        400  invalid_request_error  validation
empty_input          400  invalid_request_error  empty
schema               422  validation_error       validation
input_too_long       413  payload_too_large      validation
unauthorised         401  authentication_error   unauthorized
not_found            404  not_found_error        not_found
method_not_allowed   405  method_not_allowed     not_found
read_timeout         408  timeout_error          validation
overloaded           503  overloaded_error       overloaded
unavailable          503  unavailable_error      overloaded
shard_unavailable    503  unavailable_error      overloaded
deadline_exceeded    504  timeout_error          backend
internal             500  internal_error         backend
"""


def _parse(table: str) -> dict[ErrorKind, tuple[int, str, str]]:
    """``_TABLE`` as kind → (HTTP status, steadyrank's error type, TEI's error type); refuses a table
    that misses a kind or names one twice."""
    kinds: dict[ErrorKind, tuple[int, str, str]] = {}
    for row in table.strip().splitlines():
        kind, status, native, tei = row.split()
        if ErrorKind(kind) in kinds:
            raise ValueError(f"error table: {kind} has two rows")
        kinds[ErrorKind(kind)] = (int(status), native, tei)
    missing = [k.value for k in ErrorKind if k not in kinds]
    if missing:
        raise ValueError(f"error table: no row for {', '.join(missing)}")
    return kinds


#: kind → (HTTP status, steadyrank's error type, TEI's error type)
KINDS: dict[ErrorKind, tuple[int, str, str]] = _parse(_TABLE)

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

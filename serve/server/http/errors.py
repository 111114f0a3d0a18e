"""The one map from an error's kind (:class:`~serve.errors.ErrorKind`) to its HTTP status
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

from steadyrank.serve.errors import (
    ErrorKind,
    InputTooLongError,
    InvalidInputError,
    SchemaError,
    SteadyrankError,
)

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


#: Errors a schema error's message names (the rest are counted); characters of a field name it quotes
#: (an object key is the client's text, and a message never echoes input at length).
LISTED_ERRORS = 10
NAME_CHARS = 64


def _loc(loc: tuple[Any, ...]) -> str:
    """``("documents", 3, "text")`` → ``documents[3].text``; FastAPI's leading ``body`` is dropped,
    names longer than :data:`NAME_CHARS` are cut."""
    parts = list(loc)
    if parts and parts[0] == "body":
        parts = parts[1:]
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = str(part)
            name = name if len(name) <= NAME_CHARS else name[:NAME_CHARS] + "…"
            out += ("." if out else "") + name
    return out or "body"


def too_many_items(field: str, count: int | None, limit: int) -> InputTooLongError:
    """The 413 of a list longer than its limit (``count`` None: not known)."""
    return InputTooLongError(f"{field} has {'more' if count is None else count} items, more than the limit of {limit}")


def schema_error(exc: ValidationError | Any) -> SteadyrankError:
    """A pydantic/FastAPI validation error as one domain error: 400 for a body that is not JSON; 413
    for a list longer than its limit (:func:`~serve.server.http.dialects.schema_limits.bounded`: the parser
    stopped there); else 422 naming the first :data:`LISTED_ERRORS` bad fields and counting the
    rest. Never the input itself: built from pydantic's errors without their input or URL."""
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False, include_input=False)
    else:
        errors = exc.errors() if hasattr(exc, "errors") else []
    if any(e.get("type") in ("json_invalid", "json_type") for e in errors):
        first = next(e for e in errors if e.get("type") in ("json_invalid", "json_type"))
        return InvalidInputError(f"request body is not valid JSON: {first.get('msg', '')}".rstrip(": "))
    for error in errors:
        context = error.get("ctx") or {}
        if error.get("type") == "too_long" and context.get("field_type") == "List":
            loc = [part for part in error.get("loc", ()) if part != "body"]
            return too_many_items(_loc(tuple(loc[:1])), context.get("actual_length"), context["max_length"])
    messages = []
    for error in errors[:LISTED_ERRORS]:
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        messages.append(f"{_loc(tuple(error.get('loc', ())))}: {message}")
    more = f" (and {len(errors) - LISTED_ERRORS} more)" if len(errors) > LISTED_ERRORS else ""
    return SchemaError("; ".join(messages) + more if messages else "request does not match the schema")

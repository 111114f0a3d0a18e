"""steadyrank's domain errors, each carrying its :class:`ErrorKind`, and the input checks that raise
them. Torch-free and free of any web framework: the model replicas, the searcher and the CLI raise
these, and the HTTP layer maps a kind to a status code and to each client dialect's error body in
one place (``serve.server.http.errors.status_of`` and ``serve.server.http.errors.render``; docs/ARCHITECTURE.md,
"Error model").

Every error has a one-line message. The input errors are ``ValueError`` subclasses so that the CLI
prints them as one line (exit 2). An exception that is none of these is a bug: the server answers
it with a JSON 500 carrying only the request id.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum


class ErrorKind(str, Enum):
    """What went wrong, independent of the protocol that reports it."""

    INVALID_INPUT = "invalid_input"          # the request is wrong (bad JSON, bad value)
    EMPTY_INPUT = "empty_input"              # an empty query, document list or text
    SCHEMA = "schema"                        # the request does not match the schema (the field is named)
    INPUT_TOO_LONG = "input_too_long"        # a size or count limit (body, documents, characters, tokens)
    UNAUTHORISED = "unauthorised"            # missing or wrong API key
    NOT_FOUND = "not_found"                  # unknown route, model or resource
    METHOD_NOT_ALLOWED = "method_not_allowed"
    READ_TIMEOUT = "read_timeout"            # the client did not send its body within the read deadline
    OVERLOADED = "overloaded"                # refused before any work; retry after ``retry_after_s``
    UNAVAILABLE = "unavailable"              # a deployment is unavailable or the server drains
    SHARD_UNAVAILABLE = "shard_unavailable"  # an index shard did not answer
    DEADLINE_EXCEEDED = "deadline_exceeded"  # the request ran past its deadline
    INTERNAL = "internal"                    # a bug (never raised on purpose; the kind of a 500)


class SteadyrankError(Exception):
    """A failure steadyrank reports to its caller: ``kind`` says which, ``message`` says why (one line).
    ``retry_after_s``: when set, how long a caller should wait before retrying."""

    kind: ErrorKind = ErrorKind.INTERNAL

    def __init__(self, message: str, *, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_s = retry_after_s

    def __reduce__(self):  # noqa: ANN204 - keep the keyword through pickling (Ray sends errors across processes)
        return (_rebuild, (type(self), self.message, self.retry_after_s))


def _rebuild(cls: type[SteadyrankError], message: str, retry_after_s: int | None) -> SteadyrankError:
    return cls(message, retry_after_s=retry_after_s)


class InvalidInputError(SteadyrankError, ValueError):
    """A request refused for its content: empty query, no documents, non-string text, bad value."""

    kind = ErrorKind.INVALID_INPUT


class EmptyInputError(InvalidInputError):
    """An empty query, document list or text."""

    kind = ErrorKind.EMPTY_INPUT


class SchemaError(InvalidInputError):
    """The request does not match the schema; the message names the field(s)."""

    kind = ErrorKind.SCHEMA


class InputTooLongError(InvalidInputError):
    """A size or count limit: body bytes, documents, characters, or tokens over the model's max_length."""

    kind = ErrorKind.INPUT_TOO_LONG


class UnauthorisedError(SteadyrankError):
    kind = ErrorKind.UNAUTHORISED


class NotFoundError(SteadyrankError):
    kind = ErrorKind.NOT_FOUND


class MethodNotAllowedError(SteadyrankError):
    kind = ErrorKind.METHOD_NOT_ALLOWED


class OverloadedError(SteadyrankError):
    """Refused before any work because the server is at capacity (``retry_after_s`` is set)."""

    kind = ErrorKind.OVERLOADED


class UnavailableError(SteadyrankError):
    """A deployment cannot answer now (unavailable, or the server drains for shutdown)."""

    kind = ErrorKind.UNAVAILABLE


class ShardUnavailable(UnavailableError):
    kind = ErrorKind.SHARD_UNAVAILABLE


class ReadTimeoutError(SteadyrankError):
    """The client did not send its whole body within the read deadline."""

    kind = ErrorKind.READ_TIMEOUT


class DeadlineExceeded(SteadyrankError):
    """The request's deadline passed (or its caller gave up) before its answer was ready."""

    kind = ErrorKind.DEADLINE_EXCEEDED


class ModelLoadError(ValueError):
    """The model directory is missing or unreadable (no ``config.json``, bad tokenizer, …)."""


class UnsupportedModelError(ModelLoadError):
    """The directory holds a model whose architecture or head the runtime cannot score with."""


def check_texts(texts: Sequence[str], what: str) -> list[str]:
    """``texts`` as a list, refusing anything that is not a string."""
    if isinstance(texts, str):
        raise InvalidInputError(f"{what} must be a list of strings, got a single string")
    try:
        items = list(texts)
    except TypeError:
        raise InvalidInputError(f"{what} must be a list of strings, got {type(texts).__name__}") from None
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise InvalidInputError(f"{what}[{i}] must be a string, got {type(text).__name__}")
    return items


def check_rerank_args(query: str, documents: Sequence[str], top_n: int | None) -> list[str]:
    """The documents of a rerank call as a list, after checking every argument: a non-empty query,
    at least one document, all strings, and ``top_n`` unset or a positive integer."""
    if not isinstance(query, str) or not query.strip():
        raise EmptyInputError("query must be a non-empty string")
    docs = check_texts(documents, "documents")
    if not docs:
        raise EmptyInputError("documents must not be empty")
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
        raise InvalidInputError(f"top_n must be a positive integer, got {top_n!r}")
    return docs

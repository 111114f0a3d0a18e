"""Errors raised by the scoring runtime, and the input checks that raise them. All are
``ValueError`` subclasses with a one-line message, so the CLI prints them as one line (exit 2) and
the HTTP layer can map them to 4xx responses. Torch-free: replicas that only validate import it."""

from __future__ import annotations

from collections.abc import Sequence


class ModelLoadError(ValueError):
    """The model directory is missing or unreadable (no ``config.json``, bad tokenizer, …)."""


class UnsupportedModelError(ModelLoadError):
    """The directory holds a model whose architecture or head the runtime cannot score with."""


class InvalidInputError(ValueError):
    """A request the runtime refuses: empty query, no documents, non-string text, over-long input."""


def check_texts(texts: Sequence[str], what: str) -> list[str]:
    """``texts`` as a list, refusing anything that is not a string."""
    if isinstance(texts, str):
        raise InvalidInputError(f"{what} must be a list of strings, got a single string")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise InvalidInputError(f"{what}[{i}] must be a string, got {type(text).__name__}")
    return items


def check_rerank_args(query: str, documents: Sequence[str], top_n: int | None) -> list[str]:
    """The documents of a rerank call as a list, after checking every argument: a non-empty query,
    at least one document, all strings, and ``top_n`` unset or a positive integer."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query must be a non-empty string")
    docs = check_texts(documents, "documents")
    if not docs:
        raise InvalidInputError("documents must not be empty")
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
        raise InvalidInputError(f"top_n must be a positive integer, got {top_n!r}")
    return docs

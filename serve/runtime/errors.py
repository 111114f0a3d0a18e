"""Errors raised by the scoring runtime. All are ``ValueError`` subclasses with a one-line message,
so the CLI prints them as one line (exit 2) and the HTTP layer can map them to 4xx responses."""

from __future__ import annotations


class ModelLoadError(ValueError):
    """The model directory is missing or unreadable (no ``config.json``, bad tokenizer, …)."""


class UnsupportedModelError(ModelLoadError):
    """The directory holds a model whose architecture or head the runtime cannot score with."""


class InvalidInputError(ValueError):
    """A request the runtime refuses: empty query, no documents, non-string text, over-long input."""

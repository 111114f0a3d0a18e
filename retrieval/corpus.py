"""Documents and queries from JSONL files (BEIR ``corpus.jsonl`` / ``queries.jsonl``).

A corpus line is ``{"_id" | "id": str, "text": str, "title"?: str, "metadata"?: object}``.
Errors name the file and the 1-based line number. Invalid JSON stops reading at once
(``metrics.io.FormatError``); other problems are collected, up to :data:`MAX_REPORTED_ERRORS`,
into one :class:`CorpusError`, so a user fixes them in one pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from steadyrank.metrics.io import read_beir_queries, read_jsonl, skipped_empty_warning

MAX_REPORTED_ERRORS = 20


class CorpusError(ValueError):
    """The corpus is malformed; the message lists ``file:line: problem`` entries."""


@dataclass(frozen=True)
class Document:
    """One retrievable unit. ``text`` is non-empty; ``title`` may be empty."""

    id: str
    text: str
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def full_text(self) -> str:
        """What gets embedded, BM25-indexed and reranked: ``title + " " + text`` (text alone if no title)."""
        return f"{self.title} {self.text}" if self.title else self.text

    def to_json(self) -> dict[str, Any]:
        """The JSONL record of this document (the document store's line format)."""
        return {"id": self.id, "title": self.title, "text": self.text, "metadata": self.metadata}


def resolve_jsonl(path: str | Path, beir_name: str) -> Path:
    """``path`` itself, or ``path/beir_name`` when ``path`` is a BEIR directory."""
    p = Path(path)
    if p.is_dir():
        p = p / beir_name
    if not p.is_file():
        raise FileNotFoundError(f"no such file: {p}")
    return p


class _Errors:
    """Collects ``file:line: message`` entries and raises them together."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: list[str] = []
        self.total = 0

    def add(self, line: int, message: str) -> None:
        self.total += 1
        if len(self.items) < MAX_REPORTED_ERRORS:
            self.items.append(f"{self.path}:{line}: {message}")

    def raise_if_any(self) -> None:
        if self.items:
            more = f"\n… and {self.total - len(self.items)} more" if self.total > len(self.items) else ""
            raise CorpusError(f"{self.total} error(s) in {self.path}:\n" + "\n".join(self.items) + more)


def _record_id(record: dict[str, Any], number: int, errors: _Errors) -> str | None:
    raw = record.get("_id", record.get("id"))
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    if not isinstance(raw, str) or not raw.strip():
        errors.add(number, "missing or empty id ('_id' or 'id', a string)")
        return None
    if raw != raw.strip() or any(c.isspace() for c in raw):
        errors.add(number, f"id {raw!r} contains whitespace (TREC runs cannot hold it)")
        return None
    return raw


def _string_field(record: dict[str, Any], key: str, number: int, errors: _Errors) -> str | None:
    value = record.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        errors.add(number, f"'{key}' must be a string, got {type(value).__name__}")
        return None
    return value


@dataclass(frozen=True)
class Corpus:
    """The documents read from ``source`` and the ids of the empty ones left out (file order)."""

    source: Path
    documents: list[Document]
    skipped_empty: list[str]

    def warning(self) -> str | None:
        """The line telling a user which empty documents were skipped, or None if none were."""
        if not self.skipped_empty:
            return None
        return skipped_empty_warning(self.source, self.skipped_empty, len(self.documents) + len(self.skipped_empty))


def read_documents(path: str | Path) -> list[Document]:
    """All documents of a JSONL corpus (a file, or a BEIR directory holding ``corpus.jsonl``).

    Refuses bad JSON, missing ids, ids with whitespace, duplicate ids (naming the first line),
    empty texts (blank after stripping) and non-object metadata.
    """
    return read_corpus(path, strict=True).documents


def read_corpus(path: str | Path, *, strict: bool) -> Corpus:
    """Like :func:`read_documents`; with ``strict=False`` a document whose text is blank is left out
    and its id listed in ``Corpus.skipped_empty`` instead of refused (real BEIR corpora such as
    Cranfield hold a few). Every other problem is still refused.
    """
    source = resolve_jsonl(path, "corpus.jsonl")
    errors = _Errors(source)
    first_line: dict[str, int] = {}
    documents: list[Document] = []
    skipped: list[str] = []
    for number, record in read_jsonl(source):
        doc_id = _record_id(record, number, errors)
        text = _string_field(record, "text", number, errors)
        title = _string_field(record, "title", number, errors)
        metadata = record.get("metadata") or {}
        if not isinstance(metadata, dict):
            errors.add(number, f"'metadata' must be an object, got {type(metadata).__name__}")
            continue
        if doc_id is None or text is None or title is None:
            continue
        if doc_id in first_line:
            errors.add(number, f"duplicate id {doc_id!r} (first on line {first_line[doc_id]})")
            continue
        first_line[doc_id] = number
        if not text.strip():
            if strict:
                errors.add(number, f"empty text for id {doc_id!r}")
            else:
                skipped.append(doc_id)
            continue
        documents.append(Document(id=doc_id, text=text, title=title, metadata=metadata))
    errors.raise_if_any()
    if not documents:
        raise CorpusError(f"{source}: no documents" + (f" ({len(skipped)} empty ones skipped)" if skipped else ""))
    return Corpus(source, documents, skipped)


def read_queries(path: str | Path) -> dict[str, str]:
    """Queries ``{qid: text}`` in file order from JSONL (``_id``/``id`` + ``text``); a BEIR directory
    means its ``queries.jsonl``."""
    return read_beir_queries(resolve_jsonl(path, "queries.jsonl"))

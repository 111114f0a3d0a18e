"""Documents and queries from a corpus file or BEIR folder: one reader for every command.

Formats (:mod:`retrieval.records`): JSONL (``.jsonl``, ``.jsonl.gz``), TSV/CSV (a header row, or two
columns id and text), Parquet, and BEIR folders (``corpus.jsonl`` or ``corpus.jsonl.gz`` inside).
Which field holds what is :class:`Fields` (the CLI's ``--id-field``, ``--text-field``,
``--title-field``); a JSONL record's ``metadata`` object is kept.

Errors name the file, the line (or Parquet row) and the field. Bad bytes (invalid UTF-8, bad JSON,
corrupt gzip) stop reading at once (``metrics.io.FormatError``); other problems are collected, up to
:data:`MAX_REPORTED_ERRORS`, into one :class:`CorpusError`, so a user fixes them in one pass.

The empty-document rule, the same for every command: a document whose text is blank (empty, only
whitespace, or null) is left out and counted, and a warning names the first five
(:func:`steadyrank.metrics.io.skipped_empty_warning`); ``strict`` refuses it instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from steadyrank.metrics.io import skipped_empty_warning
from steadyrank.retrieval.records import Record, read_records

MAX_REPORTED_ERRORS = 20
#: The id fields looked for, in order, when :attr:`Fields.id` is unset.
DEFAULT_ID_FIELDS = ("_id", "id")


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


@dataclass(frozen=True)
class Fields:
    """Which field of a record holds the id, the text and the title.

    ``id`` unset: ``_id``, else ``id``. ``title`` unset: ``title`` when a record has one (none is
    fine); set: every record must have it. The text field must be in every record.
    """

    id: str | None = None
    text: str = "text"
    title: str | None = None

    def id_names(self) -> tuple[str, ...]:
        return DEFAULT_ID_FIELDS if self.id is None else (self.id,)


#: The files a BEIR folder holds its corpus or queries in, in the order they are looked for.
BEIR_NAMES = {"corpus": ("corpus.jsonl", "corpus.jsonl.gz"), "queries": ("queries.jsonl", "queries.jsonl.gz")}


def resolve_source(path: str | Path, kind: str) -> Path:
    """``path`` itself, or the ``kind`` (``corpus``/``queries``) file of the BEIR folder ``path``."""
    p = Path(path)
    if p.is_dir():
        found = next((p / name for name in BEIR_NAMES[kind] if (p / name).is_file()), None)
        if found is None:
            raise FileNotFoundError(f"{p}: a BEIR folder holds {' or '.join(BEIR_NAMES[kind])}; none found")
        return found
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such file or folder")
    return p


class _Errors:
    """Collects ``where: message`` entries and raises them together."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: list[str] = []
        self.total = 0

    def add(self, where: str, message: str) -> None:
        self.total += 1
        if len(self.items) < MAX_REPORTED_ERRORS:
            self.items.append(f"{where}: {message}")

    def raise_if_any(self) -> None:
        if self.items:
            more = f"\n… and {self.total - len(self.items)} more" if self.total > len(self.items) else ""
            raise CorpusError(f"{self.total} error(s) in {self.path}:\n" + "\n".join(self.items) + more)


def _present(record: Record) -> str:
    return ", ".join(repr(k) for k in list(record.fields)[:8]) or "none"


def _missing(record: Record, names: tuple[str, ...], flag: str | None) -> str:
    """``missing field 'x' (use FLAG; fields here: …)``; ``flag`` None for files no flag renames."""
    wanted = " or ".join(repr(n) for n in names)
    use = f"use {flag}; " if flag else ""
    return f"missing field {wanted} ({use}fields here: {_present(record)})"


def _record_id(record: Record, fields: Fields, errors: _Errors, flag: str | None = "--id-field") -> str | None:
    names = fields.id_names()
    key = next((k for k in names if k in record.fields), None)
    if key is None:
        errors.add(record.where, _missing(record, names, flag))
        return None
    raw = record.fields[key]
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    if not isinstance(raw, str):
        errors.add(record.where, f"field {key!r}: an id must be a string or an integer, got {type(raw).__name__}")
        return None
    if not raw.strip():
        errors.add(record.where, f"field {key!r}: empty id")
        return None
    if raw != raw.strip() or any(c.isspace() for c in raw):
        errors.add(record.where, f"field {key!r}: id {raw!r} contains whitespace (TREC runs cannot hold it)")
        return None
    return raw


def _string_field(record: Record, key: str, errors: _Errors, *, required: bool, flag: str | None) -> str | None:
    """The string in ``key`` ('' for null); a missing key is '' unless ``required`` (then an error
    naming ``flag``, the option that renames the field)."""
    if key not in record.fields:
        if not required:
            return ""
        errors.add(record.where, _missing(record, (key,), flag))
        return None
    value = record.fields[key]
    if value is None:
        return ""
    if not isinstance(value, str):
        errors.add(record.where, f"field {key!r} must be a string, got {type(value).__name__}")
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


def read_documents(path: str | Path, fields: Fields = Fields()) -> list[Document]:
    """All documents of a corpus (a file in any format of :mod:`retrieval.records`, or a BEIR
    folder), refusing empty documents (``read_corpus(..., strict=True)``)."""
    return read_corpus(path, strict=True, fields=fields).documents


def read_corpus(path: str | Path, *, strict: bool, fields: Fields = Fields()) -> Corpus:
    """The documents of a corpus file or BEIR folder.

    Refused, naming file, line and field: a missing id or text field, an id that is empty, holds
    whitespace or repeats an earlier one (naming its line), a text or title that is not a string,
    metadata that is not an object, and a corpus with no document left. A blank text is left out
    and listed in ``Corpus.skipped_empty`` (real BEIR corpora such as Cranfield hold a few), or
    refused when ``strict``.
    """
    source = resolve_source(path, "corpus")
    errors = _Errors(source)
    first_seen: dict[str, str] = {}
    documents: list[Document] = []
    skipped: list[str] = []
    for record in read_records(source):
        doc_id = _record_id(record, fields, errors)
        text = _string_field(record, fields.text, errors, required=True, flag="--text-field")
        title = _string_field(record, fields.title or "title", errors, required=fields.title is not None,
                              flag="--title-field")
        metadata: object = record.fields.get("metadata") or {}
        if not isinstance(metadata, dict):
            errors.add(record.where, f"field 'metadata' must be an object, got {type(metadata).__name__}")
            continue
        if doc_id is None or text is None or title is None:
            continue
        if doc_id in first_seen:
            errors.add(record.where, f"duplicate id {doc_id!r} (first on {first_seen[doc_id]})")
            continue
        first_seen[doc_id] = record.position
        if not text.strip():
            if strict:
                errors.add(record.where, f"empty text for id {doc_id!r} (field {fields.text!r}; "
                                         "--strict refuses empty documents)")
            else:
                skipped.append(doc_id)
            continue
        # a JSON object or Parquet struct: string keys
        documents.append(Document(id=doc_id, text=text, title=title, metadata=cast("dict[str, Any]", metadata)))
    errors.raise_if_any()
    if not documents:
        raise CorpusError(f"{source}: no documents" + (f" ({len(skipped)} empty ones skipped)" if skipped else ""))
    return Corpus(source, documents, skipped)


def read_queries(path: str | Path) -> dict[str, str]:
    """Queries ``{qid: text}`` in file order from a queries file (any format of
    :mod:`retrieval.records`; fields ``_id``/``id`` and ``text``) or a BEIR folder's queries file.
    Every problem is refused, naming file, line and field; an empty query too."""
    source = resolve_source(path, "queries")
    errors = _Errors(source)
    queries: dict[str, str] = {}
    first_seen: dict[str, str] = {}
    for record in read_records(source):
        qid = _record_id(record, Fields(), errors, flag=None)
        text = _string_field(record, "text", errors, required=True, flag=None)
        if qid is None or text is None:
            continue
        if qid in first_seen:
            errors.add(record.where, f"duplicate query id {qid!r} (first on {first_seen[qid]})")
        elif not text.strip():
            errors.add(record.where, f"empty text for query {qid!r} (field 'text')")
        else:
            first_seen[qid] = record.position
            queries[qid] = text
    errors.raise_if_any()
    return queries

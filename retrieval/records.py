"""Records (one dict per document or query) from the file formats a corpus comes in.

The format is chosen by the file's name, and gzip by its first bytes (so ``corpus.jsonl.gz`` and a
gzipped ``corpus.jsonl`` both read):

- ``.jsonl`` / ``.ndjson`` / ``.json`` (one JSON object per line), optionally gzipped;
- ``.tsv`` / ``.csv``, optionally gzipped: a header row naming the columns, or, without one, exactly
  two columns read as ``id`` and ``text`` (MS MARCO ``collection.tsv``, ``queries.tsv``). TSV has no
  quoting (a tab ends a field); CSV follows RFC 4180 quoting;
- ``.parquet``: one record per row (needs pyarrow, part of the ``server`` extra).

Every record carries its location: the 1-based line of a text file (the header is line 1), or the
1-based row of a Parquet file. Bad bytes are refused with the file and line: invalid UTF-8, bad
JSON, a truncated gzip stream.
"""

from __future__ import annotations

import csv
import gzip
import importlib
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from steadyrank.metrics.io import FormatError, jsonl_objects

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
TABLE_SUFFIXES = {".tsv": "\t", ".csv": ","}
PARQUET_SUFFIX = ".parquet"
FORMATS = "JSONL (.jsonl, .jsonl.gz), TSV/CSV (.tsv, .csv, optionally .gz), Parquet (.parquet)"
GZIP_MAGIC = b"\x1f\x8b"
#: Column names of a header-less two-column TSV/CSV file.
HEADERLESS_COLUMNS = ("id", "text")
#: The largest CSV field read (bytes); Python's default (128 KiB) is smaller than some documents.
MAX_CSV_FIELD = 64 * 1024 * 1024


@dataclass(frozen=True)
class Record:
    """One record and where it came from: ``where`` is ``FILE:LINE`` (1-based text line) or
    ``FILE row N`` (1-based Parquet row); ``position`` is ``line N`` or ``row N``."""

    where: str
    position: str
    fields: dict[str, Any]


def record_format(path: Path) -> str:
    """``jsonl``, ``tsv``, ``csv`` or ``parquet`` from the file name (a trailing ``.gz`` ignored)."""
    name = path.name.lower().removesuffix(".gz")
    if name.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith(PARQUET_SUFFIX):
        return "parquet"
    for suffix in TABLE_SUFFIXES:
        if name.endswith(suffix):
            return suffix[1:]
    raise FormatError(path, None, f"unknown corpus format (the name must end in one of: {FORMATS})")


def read_records(path: str | Path) -> Iterator[Record]:
    """Every record of ``path`` in file order (see the module docstring for the formats)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    kind = record_format(path)
    if kind == "parquet":
        yield from _parquet_records(path)
        return
    lines = _text_lines(path)
    yield from (_jsonl_records(path, lines) if kind == "jsonl" else _table_records(path, lines, kind))


def _open_binary(path: Path) -> BinaryIO:
    raw = open(path, "rb")  # noqa: SIM115 — returned to the caller, closed by its ``with``
    if raw.read(2) == GZIP_MAGIC:
        raw.seek(0)
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    raw.seek(0)
    return raw


def _text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of every line, decoded as UTF-8 (a BOM on line 1 dropped)."""
    number = 0
    with _open_binary(path) as handle:
        try:
            for number, raw in enumerate(handle, start=1):  # noqa: B007 — read after the loop on error
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise FormatError(path, number, f"not UTF-8: byte 0x{raw[exc.start]:02x} at column {exc.start + 1} "
                                                    "(re-encode the file as UTF-8)") from None
                yield number, text.removeprefix("\ufeff") if number == 1 else text
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise FormatError(path, number + 1, f"corrupt or truncated gzip data ({exc})") from None


def _jsonl_records(path: Path, lines: Iterator[tuple[int, str]]) -> Iterator[Record]:
    for number, record in jsonl_objects(path, lines):
        yield Record(f"{path}:{number}", f"line {number}", record)


def _split_rows(path: Path, lines: Iterator[tuple[int, str]], kind: str) -> Iterator[tuple[int, list[str]]]:
    """``(line number, cells)`` of every non-blank row (a CSV row may span lines: its first line)."""
    if kind == "tsv":
        for number, line in lines:
            line = line.rstrip("\r\n")
            if line.strip():
                yield number, line.split("\t")
        return
    first_line = {"n": 0}

    def text() -> Iterator[str]:
        for number, line in lines:
            first_line["n"] = first_line["n"] or number
            yield line

    csv.field_size_limit(MAX_CSV_FIELD)
    reader = csv.reader(text(), strict=True)
    try:
        for cells in reader:
            number, first_line["n"] = first_line["n"], 0
            if any(c.strip() for c in cells):
                yield number, cells
    except csv.Error as exc:
        raise FormatError(path, first_line["n"] or None, f"bad CSV: {exc}") from None


def _table_records(path: Path, lines: Iterator[tuple[int, str]], kind: str) -> Iterator[Record]:
    rows = _split_rows(path, lines, kind)
    first = next(rows, None)
    if first is None:
        return
    number, cells = first
    if len(cells) == len(HEADERLESS_COLUMNS) and not _looks_like_header(cells):
        header: list[str] = list(HEADERLESS_COLUMNS)
        rows = _chain(first, rows)
    else:
        header = [c.strip() for c in cells]
        if len(set(header)) != len(header) or not all(header):
            raise FormatError(path, number, f"the header row {header} must name every column once "
                                            f"(or leave it out of a two-column {kind.upper()} of id and text)")
    for number, cells in rows:
        if len(cells) != len(header):
            raise FormatError(path, number, f"{len(cells)} column(s), the header has {len(header)} ({', '.join(header)})"
                              + (" (a tab inside a TSV field splits it: use CSV or JSONL)" if kind == "tsv" else ""))
        yield Record(f"{path}:{number}", f"line {number}", dict(zip(header, cells, strict=True)))


def _looks_like_header(cells: list[str]) -> bool:
    """A first row of two cells is a header when it names a known id column (``id``, ``_id``,
    ``docid``, ``pid``, ``qid``…)."""
    return cells[0].strip().lower() in {"id", "_id", "docid", "doc_id", "pid", "qid", "query_id", "query-id"}


def _chain(first: tuple[int, list[str]], rest: Iterator[tuple[int, list[str]]]) -> Iterator[tuple[int, list[str]]]:
    yield first
    yield from rest


def _parquet_records(path: Path) -> Iterator[Record]:
    try:
        # pyarrow ships no type stubs: its module is typed as Any here
        pq: Any = importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise FormatError(path, None, "reading Parquet needs pyarrow: pip install 'steadyrank[server]'") from None
    try:
        table: Any = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 — pyarrow raises its own ArrowInvalid/OSError kinds
        raise FormatError(path, None, f"not a readable Parquet file ({exc})") from None
    row = 0
    for batch in table.iter_batches():
        for record in batch.to_pylist():
            row += 1
            yield Record(f"{path} row {row}", f"row {row}", record)

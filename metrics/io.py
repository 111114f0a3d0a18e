"""Readers and writers for standard evaluation formats, with errors that name file and line.

- TREC run: ``qid Q0 docid rank score tag`` (whitespace separated). The file's line order is the
  ``input`` tie-break order; the rank column is ignored (as trec_eval does).
- TREC qrels: ``qid iteration docid grade``; BEIR qrels: ``query-id<TAB>corpus-id<TAB>score``
  with or without a header line. Unjudged documents are non-relevant.
- BEIR folder: ``corpus.jsonl`` (``_id``, ``title``, ``text``, ``metadata``), ``queries.jsonl``
  (``_id``, ``text``), ``qrels/<split>.tsv``.

Malformed lines, NaN/inf scores and duplicates raise :class:`FormatError` (a ValueError).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

Run = dict[str, dict[str, float]]
Qrels = dict[str, dict[str, float]]


class FormatError(ValueError):
    """Bad input, located: ``path:line: problem``."""

    def __init__(self, path: str | os.PathLike[str], line: int | None, problem: str) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {problem}")


def _lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, list[str]]]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.split()
            if fields:
                yield number, fields


def _number(path: str | os.PathLike[str], line: int, text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise FormatError(path, line, f"{what} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise FormatError(path, line, f"{what} is {text}: it must be finite")
    return value


def read_trec_run(path: str | os.PathLike[str]) -> Run:
    """``{qid: {docid: score}}`` in file order. Six fields per line; finite scores; unique docids."""
    run: Run = {}
    for line, fields in _lines(path):
        if len(fields) != 6:
            raise FormatError(path, line, f"expected 6 fields 'qid Q0 docid rank score tag', got {len(fields)}")
        qid, _, docid, _, score, _ = fields
        ranking = run.setdefault(qid, {})
        if docid in ranking:
            raise FormatError(path, line, f"duplicate docid {docid!r} for query {qid!r}")
        ranking[docid] = _number(path, line, score, "score")
    return run


def read_qrels(path: str | os.PathLike[str]) -> Qrels:
    """``{qid: {docid: grade}}`` from TREC (4 fields) or BEIR (3 fields, optional header) qrels."""
    qrels: Qrels = {}
    for line, fields in _lines(path):
        if line == 1 and len(fields) == 3 and fields[0].lower() in ("query-id", "query_id", "qid"):
            continue
        if len(fields) == 4:
            qid, _, docid, grade = fields
        elif len(fields) == 3:
            qid, docid, grade = fields
        else:
            raise FormatError(
                path, line, f"expected 'qid 0 docid grade' (TREC) or 'qid docid grade' (BEIR), got {len(fields)} fields"
            )
        judgments = qrels.setdefault(qid, {})
        if docid in judgments:
            raise FormatError(path, line, f"duplicate judgment of {docid!r} for query {qid!r}")
        judgments[docid] = _number(path, line, grade, "grade")
    return qrels


def write_trec_run(path: str | os.PathLike[str], run: Mapping[str, Mapping[str, float]], tag: str = "steadyrank") -> None:
    """Write a TREC run atomically (temp file + rename), ranks by score desc, ties in input order."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            for qid, ranking in run.items():
                ordered = sorted(enumerate(ranking.items()), key=lambda item: (-item[1][1], item[0]))
                for rank, (_, (docid, score)) in enumerate(ordered, start=1):
                    out.write(f"{qid} Q0 {docid} {rank} {score!r} {tag}\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-empty line; bad JSON or a non-object is a FormatError."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    with path.open(encoding="utf-8") as handle:
        yield from jsonl_objects(path, enumerate(handle, start=1))


def jsonl_objects(path: str | os.PathLike[str], lines: Iterable[tuple[int, str]]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank of the numbered ``lines`` of ``path``; bad JSON
    or a non-object is a FormatError naming the line."""
    for number, line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FormatError(path, number, f"bad JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(record, dict):
            raise FormatError(path, number, f"expected a JSON object, got {type(record).__name__}")
        yield number, cast("dict[str, Any]", record)  # a JSON object's keys are strings


#: How many skipped ids a warning names.
NAMED_SKIPPED_IDS = 5


def skipped_empty_warning(source: str | os.PathLike[str], skipped: Sequence[str], total: int) -> str:
    """``skipped N empty document(s) of TOTAL in SOURCE (ids: a, b, …); --strict refuses them``."""
    named = ", ".join(repr(i) for i in skipped[:NAMED_SKIPPED_IDS])
    more = f", … {len(skipped) - NAMED_SKIPPED_IDS} more" if len(skipped) > NAMED_SKIPPED_IDS else ""
    return (f"skipped {len(skipped)} empty document(s) of {total} in {source} (ids: {named}{more}); "
            "--strict refuses them")


def _record_id(path: str | os.PathLike[str], line: int, record: dict[str, Any], id_keys: tuple[str, ...]) -> str:
    key = next((k for k in id_keys if k in record), None)
    if key is None:
        raise FormatError(path, line, f"missing id field ({' or '.join(id_keys)})")
    return str(record[key])


def _has_text(record: dict[str, Any]) -> bool:
    text = record.get("text")
    return isinstance(text, str) and bool(text.strip())


def _id_and_text(path: str | os.PathLike[str], line: int, record: dict[str, Any], id_keys: tuple[str, ...]) -> tuple[str, str]:
    record_id = _record_id(path, line, record, id_keys)
    if not _has_text(record):
        raise FormatError(path, line, f"id {record_id!r}: missing or empty 'text'")
    return record_id, record["text"]


def read_beir_corpus_skipping_empty(
    path: str | os.PathLike[str], *, strict: bool = True
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """``({docid: {"title", "text", "metadata"}}, skipped ids)`` from BEIR ``corpus.jsonl``.

    A record whose ``text`` is missing, not a string or blank is refused with a FormatError when
    ``strict``, otherwise left out and its id listed (in file order) in the second value.
    """
    corpus: dict[str, dict[str, Any]] = {}
    skipped: dict[str, None] = {}
    for line, record in read_jsonl(path):
        docid = _record_id(path, line, record, ("_id", "id"))
        if docid in corpus or docid in skipped:
            raise FormatError(path, line, f"duplicate document id {docid!r}")
        if not strict and not _has_text(record):
            skipped[docid] = None
            continue
        docid, text = _id_and_text(path, line, record, ("_id", "id"))
        corpus[docid] = {"title": record.get("title") or "", "text": text, "metadata": record.get("metadata") or {}}
    return corpus, list(skipped)


def read_beir_corpus(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """``{docid: {"title", "text", "metadata"}}`` from BEIR ``corpus.jsonl`` (or JSONL with ``id``);
    an empty text is a FormatError."""
    return read_beir_corpus_skipping_empty(path, strict=True)[0]


def read_beir_queries(path: str | os.PathLike[str]) -> dict[str, str]:
    """``{qid: text}`` from BEIR ``queries.jsonl`` (or JSONL with ``id``)."""
    queries: dict[str, str] = {}
    for line, record in read_jsonl(path):
        qid, text = _id_and_text(path, line, record, ("_id", "id"))
        if qid in queries:
            raise FormatError(path, line, f"duplicate query id {qid!r}")
        queries[qid] = text
    return queries


@dataclass(frozen=True)
class BeirData:
    """A BEIR folder: corpus, queries and one split of qrels."""

    corpus: dict[str, dict[str, Any]]
    queries: dict[str, str]
    qrels: Qrels
    skipped_empty: list[str] = field(default_factory=list)


def read_beir(folder: str | os.PathLike[str], split: str = "test", *, strict: bool = True) -> BeirData:
    """Read ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv`` from a BEIR folder.

    ``strict=False`` leaves documents with an empty text out of the corpus and lists their ids in
    ``skipped_empty``; ``strict=True`` refuses them (FormatError).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: not a directory")
    corpus, skipped = read_beir_corpus_skipping_empty(folder / "corpus.jsonl", strict=strict)
    return BeirData(corpus, read_beir_queries(folder / "queries.jsonl"), read_qrels(folder / "qrels" / f"{split}.tsv"),
                    skipped)


def _is_jsonl(path: str | os.PathLike[str]) -> bool:
    return Path(path).suffix.lower() in (".jsonl", ".ndjson")


def _field(path: str | os.PathLike[str], line: int, record: Mapping[str, Any], *names: str) -> str:
    for name in names:
        if name in record and record[name] is not None:
            return str(record[name])
    raise FormatError(path, line, f"missing field {names[0]!r}")


def read_sources(path: str | os.PathLike[str]) -> dict[str, str]:
    """``{docid: source}``: lines ``docid source`` (the rest of the line is the source or facet), or
    JSONL ``{"docid", "source"}`` (``facet`` also accepted). A docid given twice is an error."""
    sources: dict[str, str] = {}
    if _is_jsonl(path):
        entries: Iterable[tuple[int, str, str]] = (
            (line, _field(path, line, r, "docid", "_id", "id"), _field(path, line, r, "source", "facet"))
            for line, r in read_jsonl(path))
    else:
        entries = ((line, fields[0], " ".join(fields[1:])) for line, fields in _lines(path))
    for line, docid, source in entries:
        if not source:
            raise FormatError(path, line, f"no source for document {docid!r}: expected 'docid source'")
        if docid in sources:
            raise FormatError(path, line, f"document {docid!r} is given a source twice")
        sources[docid] = source
    return sources


def _unit(path: str | os.PathLike[str], line: int, value: object, what: str) -> float | None:
    """A label in [0, 1]; ``-``, empty or null = not given."""
    if value is None or value in ("-", ""):
        return None
    number = _number(path, line, str(value), what)
    if not 0.0 <= number <= 1.0:
        raise FormatError(path, line, f"{what} {number:g} is outside [0, 1]")
    return number


def read_udcg_labels(path: str | os.PathLike[str]) -> tuple[Qrels, Qrels]:
    """``(utility, distraction)``, each ``{qid: {docid: value in [0, 1]}}``: lines
    ``qid docid utility distraction`` (``-`` where one is not given) or JSONL
    ``{"qid", "docid", "utility"?, "distraction"?}``."""
    utility: Qrels = {}
    distraction: Qrels = {}
    if _is_jsonl(path):
        rows: Iterable[tuple[int, str, str, object, object]] = (
            (line, _field(path, line, r, "qid", "query-id"), _field(path, line, r, "docid", "corpus-id"),
             r.get("utility"), r.get("distraction")) for line, r in read_jsonl(path))
    else:
        def split(line: int, fields: list[str]) -> tuple[int, str, str, object, object]:
            if len(fields) != 4:
                raise FormatError(path, line, f"expected 'qid docid utility distraction', got {len(fields)} fields")
            return line, fields[0], fields[1], fields[2], fields[3]

        rows = (split(line, fields) for line, fields in _lines(path))
    for line, qid, docid, u, d in rows:
        if docid in utility.get(qid, {}) or docid in distraction.get(qid, {}):
            raise FormatError(path, line, f"document {docid!r} of query {qid!r} is labelled twice")
        for table, value, what in ((utility, u, "utility"), (distraction, d, "distraction")):
            number = _unit(path, line, value, what)
            if number is not None:
                table.setdefault(qid, {})[docid] = number
    return utility, distraction


_TRUE, _FALSE = ("1", "true", "yes", "correct"), ("0", "false", "no", "wrong", "incorrect")


def read_answers(path: str | os.PathLike[str]) -> dict[str, bool]:
    """``{qid: answer correct?}``: lines ``qid correct`` (1/0, true/false, yes/no) or JSONL
    ``{"qid", "correct"}``. A query given twice is an error."""
    answers: dict[str, bool] = {}
    if _is_jsonl(path):
        rows: Iterable[tuple[int, str, object]] = (
            (line, _field(path, line, r, "qid", "query-id", "_id"), r.get("correct")) for line, r in read_jsonl(path))
    else:
        def split(line: int, fields: list[str]) -> tuple[int, str, object]:
            if len(fields) != 2:
                raise FormatError(path, line, f"expected 'qid correct', got {len(fields)} fields")
            return line, fields[0], fields[1]

        rows = (split(line, fields) for line, fields in _lines(path))
    for line, qid, value in rows:
        text = str(value).strip().lower()
        if isinstance(value, bool) or text in _TRUE + _FALSE:
            correct = value if isinstance(value, bool) else text in _TRUE
        else:
            raise FormatError(path, line, f"correct is {value!r}: expected 1/0, true/false or yes/no")
        if qid in answers:
            raise FormatError(path, line, f"query {qid!r} is given twice")
        answers[qid] = correct
    return answers

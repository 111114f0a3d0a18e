"""Golden sets: queries with graded judgments on the 1–5 rubric, validated at load.

Two layouts are accepted:

- a JSONL file, one ``{"query_id": str, "query": str, "judgments": {"doc_id": grade}}`` per line,
  with an optional ``"segment": str`` (tenant, language, tag: :mod:`.segments`' names, at most
  :data:`MAX_SEGMENT_CHARS` characters; a query without one is in ``default``);
- a BEIR folder (``queries.jsonl`` + ``qrels/<split>.tsv``); queries without judgments are skipped,
  every query is in segment ``default``.

Grades are mapped onto the rubric with ``grade_map`` when given (other scales), then must be
integers in 1–5 (5 fully answers … 1 off-topic). For the ranked metrics (nDCG, MRR, MAP,
Recall) the rubric becomes a relevance grade ``max(0, rubric − 2)`` (5→3, 4→2, 3→1, ≤2→0), so
"relevant" means rubric ≥ 3; the set metrics (RA-nWG, N-Recall, Harm) read the rubric itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from steadyrank.metrics import FormatError, read_beir_queries, read_jsonl, read_qrels
from steadyrank.serve.server.quality.segments import DEFAULT_SEGMENT, segment_name

#: Relevance grade → rubric, for ``metrics.evaluate(rubric_map=...)`` (0 also maps unjudged → 1).
RELEVANCE_TO_RUBRIC: Mapping[float, float] = {0: 1, 1: 3, 2: 4, 3: 5}
#: Longest segment name a golden set may carry (the served limit is ``quality.segments.max_length``).
MAX_SEGMENT_CHARS = 128
DEMO_GOLDEN = Path(__file__).resolve().parents[2] / "data" / "demo" / "golden.jsonl"


def normalise_query(text: str) -> str:
    """Lower-case, punctuation-free, single-spaced text: how live queries are matched to golden ones."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


@dataclass(frozen=True)
class GoldenQuery:
    """One golden query, its rubric judgments and its segment."""

    query_id: str
    query: str
    judgments: dict[str, int]
    segment: str = DEFAULT_SEGMENT

    @property
    def relevance(self) -> dict[str, int]:
        """Judgments as relevance grades ``max(0, rubric − 2)`` for the ranked metrics."""
        return {doc: max(0, grade - 2) for doc, grade in self.judgments.items()}


@dataclass(frozen=True)
class GoldenSet:
    """Golden queries by id, with a lookup by normalised query text."""

    queries: dict[str, GoldenQuery]

    def __post_init__(self) -> None:
        if not self.queries:
            raise ValueError("the golden set has no judged query")

    def __len__(self) -> int:
        return len(self.queries)

    def segments(self) -> list[str]:
        """The segments its queries are tagged with, sorted."""
        return sorted({q.segment for q in self.queries.values()})

    def match(self, query_text: str) -> GoldenQuery | None:
        """The golden query whose normalised text equals ``query_text``'s, if any."""
        return self._by_text.get(normalise_query(query_text))

    @cached_property
    def _by_text(self) -> dict[str, GoldenQuery]:
        return {normalise_query(q.query): q for q in self.queries.values()}


def _rubric_grade(path, line: int | None, doc: str, grade: object, grade_map: Mapping[int, int] | None) -> int:
    if isinstance(grade, bool) or not isinstance(grade, (int, float)) or float(grade) != int(grade):
        raise FormatError(path, line, f"grade of {doc!r} must be an integer, got {grade!r}")
    grade = int(grade)
    if grade_map is not None:
        if grade not in grade_map:
            raise FormatError(path, line, f"grade {grade} of {doc!r} is not in grade_map {dict(grade_map)}")
        grade = grade_map[grade]
    if not 1 <= grade <= 5:
        raise FormatError(path, line, f"grade {grade} of {doc!r} is outside the 1-5 rubric (set grade_map for other scales)")
    return grade


def _from_jsonl(path: Path, grade_map: Mapping[int, int] | None) -> dict[str, GoldenQuery]:
    queries: dict[str, GoldenQuery] = {}
    for line, record in read_jsonl(path):
        query_id, text, judgments = record.get("query_id"), record.get("query"), record.get("judgments")
        if not isinstance(query_id, (str, int)) or str(query_id) == "":
            raise FormatError(path, line, "missing 'query_id'")
        query_id = str(query_id)
        if not isinstance(text, str) or not text.strip():
            raise FormatError(path, line, f"query {query_id!r}: missing or empty 'query'")
        if not isinstance(judgments, dict) or not judgments:
            raise FormatError(path, line, f"query {query_id!r}: 'judgments' must be a non-empty object")
        if query_id in queries:
            raise FormatError(path, line, f"duplicate query_id {query_id!r}")
        grades = {str(d): _rubric_grade(path, line, str(d), g, grade_map) for d, g in judgments.items()}
        segment = record.get("segment")
        if segment is not None and not isinstance(segment, str):
            raise FormatError(path, line, f"query {query_id!r}: 'segment' must be a string")
        try:
            segment = segment_name(segment, MAX_SEGMENT_CHARS)
        except ValueError as exc:
            raise FormatError(path, line, f"query {query_id!r}: {exc}") from None
        queries[query_id] = GoldenQuery(query_id, text, grades, segment)
    return queries


def _from_beir(folder: Path, split: str, grade_map: Mapping[int, int] | None) -> dict[str, GoldenQuery]:
    texts = read_beir_queries(folder / "queries.jsonl")
    qrels_path = folder / "qrels" / f"{split}.tsv"
    queries: dict[str, GoldenQuery] = {}
    for query_id, judgments in read_qrels(qrels_path).items():
        if query_id not in texts:
            raise FormatError(qrels_path, None, f"query {query_id!r} has judgments but no text in queries.jsonl")
        grades = {d: _rubric_grade(qrels_path, None, d, g, grade_map) for d, g in judgments.items()}
        queries[query_id] = GoldenQuery(query_id, texts[query_id], grades)
    return queries


def load_golden(path: str | Path | None = None, *, split: str = "test",
                grade_map: Mapping[int, int] | None = None) -> GoldenSet:
    """Load and validate a golden set (JSONL file or BEIR folder); ``None`` = the embedded demo set."""
    path = DEMO_GOLDEN if path is None else Path(path)
    if path.is_dir():
        return GoldenSet(_from_beir(path, split, grade_map))
    if not path.exists():
        raise FileNotFoundError(f"{path}: golden set not found")
    return GoldenSet(_from_jsonl(path, grade_map))

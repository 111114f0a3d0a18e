"""Golden sets load from JSONL or BEIR, map grades, and refuse bad input with located errors."""

from __future__ import annotations

import json

import pytest

from steadyrank.metrics import FormatError
from steadyrank.serve.server.quality.golden_sets import load_golden, normalise_query


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_jsonl_and_match_by_normalised_text(tmp_path):
    path = write_jsonl(tmp_path / "g.jsonl", [{"query_id": "q1", "query": "How do I mount NFS?", "judgments": {"d1": 5, "d2": 2}}])
    golden = load_golden(path)
    assert golden.match("  how do i MOUNT nfs ") is golden.queries["q1"]
    assert golden.queries["q1"].relevance == {"d1": 3, "d2": 0}
    assert golden.match("something else") is None
    assert normalise_query("Hello,   World!") == "hello world"


def test_beir_folder_with_grade_map(tmp_path):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "a"}\n{"_id": "q2", "text": "b"}\n')
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t3\nq1\td2\t1\n")
    golden = load_golden(tmp_path, grade_map={3: 5, 2: 4, 1: 3, 0: 1})
    assert list(golden.queries) == ["q1"] and golden.queries["q1"].judgments == {"d1": 5, "d2": 3}


@pytest.mark.parametrize(
    "record, message",
    [
        ({"query": "x", "judgments": {"d": 5}}, ":1: missing 'query_id'"),
        ({"query_id": "q", "query": " ", "judgments": {"d": 5}}, "missing or empty 'query'"),
        ({"query_id": "q", "query": "x", "judgments": {}}, "'judgments' must be a non-empty object"),
        ({"query_id": "q", "query": "x", "judgments": {"d": 7}}, "outside the 1-5 rubric"),
        ({"query_id": "q", "query": "x", "judgments": {"d": "5"}}, "must be an integer"),
        ({"query_id": "q", "query": "x", "judgments": {"d": 5}, "segment": 3}, "'segment' must be a string"),
        ({"query_id": "q", "query": "x", "judgments": {"d": 5}, "segment": "a b"}, "segment: letters, digits"),
        ({"query_id": "q", "query": "x", "judgments": {"d": 5}, "segment": "x" * 129}, "at most 128 characters"),
    ],
)
def test_bad_records(tmp_path, record, message):
    with pytest.raises(FormatError, match=message):
        load_golden(write_jsonl(tmp_path / "g.jsonl", [record]))


def test_duplicates_and_missing(tmp_path):
    record = {"query_id": "q", "query": "x", "judgments": {"d": 5}}
    with pytest.raises(FormatError, match=":2: duplicate query_id 'q'"):
        load_golden(write_jsonl(tmp_path / "g.jsonl", [record, record]))
    with pytest.raises(FileNotFoundError):
        load_golden(tmp_path / "absent.jsonl")
    with pytest.raises(ValueError, match="no judged query"):
        load_golden(write_jsonl(tmp_path / "empty.jsonl", []))


def test_segments_are_read_and_default(tmp_path):
    golden = load_golden(write_jsonl(tmp_path / "g.jsonl", [
        {"query_id": "q1", "query": "x", "judgments": {"d": 5}, "segment": "de"},
        {"query_id": "q2", "query": "y", "judgments": {"d": 5}}]))
    assert golden.queries["q1"].segment == "de" and golden.queries["q2"].segment == "default"
    assert golden.segments() == ["de", "default"]

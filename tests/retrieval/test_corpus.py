"""Corpus and query files: BEIR and plain JSONL, errors with line numbers."""

from __future__ import annotations

import json

import pytest

from steadyrank.metrics.io import FormatError
from steadyrank.retrieval.corpus import CorpusError, Document, read_documents, read_queries


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_beir_folder_and_plain_jsonl(tmp_path):
    write_lines(tmp_path / "corpus.jsonl", [
        json.dumps({"_id": "1", "title": "T", "text": "body", "metadata": {"url": "u"}}),
        "",
        json.dumps({"id": 2, "text": "second"}),
    ])
    docs = read_documents(tmp_path)
    assert docs == [Document("1", "body", "T", {"url": "u"}), Document("2", "second")]
    assert docs[0].full_text == "T body" and docs[1].full_text == "second"


def test_problems_are_collected_with_line_numbers(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", [
        json.dumps({"_id": "a", "text": "fine"}),
        json.dumps({"_id": "a", "text": "again"}),
        json.dumps({"_id": "b", "text": "   "}),
        json.dumps({"text": "no id"}),
        json.dumps({"_id": "c d", "text": "space in id"}),
        json.dumps({"_id": "e", "text": "x", "metadata": [1]}),
    ])
    with pytest.raises(CorpusError) as info:
        read_documents(path)
    message = str(info.value)
    assert "5 error(s)" in message
    for expected in ["c.jsonl:2: duplicate id 'a' (first on line 1)", "c.jsonl:3: empty text for id 'b'",
                     "c.jsonl:4: missing field '_id' or 'id' (use --id-field; fields here: 'text')",
                     "c.jsonl:5: field '_id': id 'c d' contains whitespace",
                     "c.jsonl:6: field 'metadata' must be an object"]:
        assert expected in message


def test_bad_json_names_the_line(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", [json.dumps({"_id": "a", "text": "ok"}), '{"_id": "b", "text": '])
    with pytest.raises(FormatError, match=r"c.jsonl:2: bad JSON"):
        read_documents(path)


def test_missing_file_and_queries(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_documents(tmp_path / "nope.jsonl")
    write_lines(tmp_path / "queries.jsonl", [json.dumps({"_id": "q1", "text": "what"})])
    assert read_queries(tmp_path) == {"q1": "what"}

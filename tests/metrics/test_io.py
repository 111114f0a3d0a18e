"""Readers fail loudly with file:line on bad input, and round-trip good input."""

from __future__ import annotations

import re

import pytest

from steadyrank.metrics import FormatError, read_beir, read_qrels, read_trec_run, write_trec_run


def write(tmp_path, name, text):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_run_keeps_file_order_and_round_trips(tmp_path):
    path = write(tmp_path, "a.run", "q1 Q0 b 1 0.5 t\nq1 Q0 a 2 0.5 t\nq1 Q0 c 3 0.9 t\n")
    run = read_trec_run(path)
    assert list(run["q1"]) == ["b", "a", "c"]
    write_trec_run(tmp_path / "b.run", run)
    lines = (tmp_path / "b.run").read_text().splitlines()
    assert [line.split()[2] for line in lines] == ["c", "b", "a"]  # score desc, ties in input order
    assert read_trec_run(tmp_path / "b.run")["q1"] == run["q1"]


@pytest.mark.parametrize(
    "text, problem",
    [
        ("q1 Q0 a 1 0.5\n", ":1: expected 6 fields"),
        ("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 nan t\n", ":2: score is nan"),
        ("q1 Q0 a 1 inf t\n", ":1: score is inf"),
        ("q1 Q0 a 1 high t\n", ":1: score 'high' is not a number"),
        ("q1 Q0 a 1 0.5 t\nq1 Q0 a 2 0.4 t\n", ":2: duplicate docid 'a' for query 'q1'"),
    ],
)
def test_bad_runs_name_file_line_and_problem(tmp_path, text, problem):
    path = write(tmp_path, "bad.run", text)
    with pytest.raises(FormatError) as error:
        read_trec_run(path)
    assert str(error.value) == f"{path}{problem}" or problem in str(error.value)
    assert str(path) in str(error.value)


def test_qrels_trec_and_beir_with_and_without_header(tmp_path):
    trec = read_qrels(write(tmp_path, "q.trec", "q1 0 a 2\nq1 0 b 0\n"))
    beir = read_qrels(write(tmp_path, "q.tsv", "query-id\tcorpus-id\tscore\nq1\ta\t2\nq1\tb\t0\n"))
    bare = read_qrels(write(tmp_path, "r.tsv", "q1\ta\t2\nq1\tb\t0\n"))
    assert trec == beir == bare == {"q1": {"a": 2.0, "b": 0.0}}


@pytest.mark.parametrize(
    "text, problem",
    [("q1 0 a 2\nq1 0 a 1\n", ":2: duplicate judgment"), ("q1 a\n", ":1: expected"), ("q1 0 a x\n", "grade 'x'")],
)
def test_bad_qrels(tmp_path, text, problem):
    with pytest.raises(FormatError, match=problem):
        read_qrels(write(tmp_path, "bad.qrels", text))


def test_beir_folder_and_its_errors(tmp_path):
    write(tmp_path, "beir/corpus.jsonl", '{"_id": "d1", "title": "T", "text": "hello"}\n')
    write(tmp_path, "beir/queries.jsonl", '{"_id": "q1", "text": "hi"}\n')
    write(tmp_path, "beir/qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    data = read_beir(tmp_path / "beir")
    assert data.corpus["d1"]["text"] == "hello" and data.queries == {"q1": "hi"} and data.qrels == {"q1": {"d1": 1.0}}
    write(tmp_path, "beir/corpus.jsonl", '{"_id": "d1", "text": "x"}\n{"_id": "d1", "text": "y"}\n')
    with pytest.raises(FormatError, match=r"corpus.jsonl:2: duplicate document id 'd1'"):
        read_beir(tmp_path / "beir")
    write(tmp_path, "beir/corpus.jsonl", '{"_id": "d1", "text": "x"}\n{"_id": "d2", "text": ""}\n')
    with pytest.raises(FormatError, match=r"corpus.jsonl:2: id 'd2': missing or empty 'text'"):
        read_beir(tmp_path / "beir")
    write(tmp_path, "beir/corpus.jsonl", '{"_id": "d1", "text": "x"\n')
    with pytest.raises(FormatError, match=r"corpus.jsonl:1: bad JSON"):
        read_beir(tmp_path / "beir")
    with pytest.raises(FileNotFoundError):
        read_beir(tmp_path / "nowhere")


def test_label_and_answer_readers(tmp_path):
    from steadyrank.metrics.io import read_answers, read_sources, read_udcg_labels

    (tmp_path / "sources.tsv").write_text("d1 example.org\nd2 a facet with spaces\n")
    assert read_sources(tmp_path / "sources.tsv") == {"d1": "example.org", "d2": "a facet with spaces"}
    (tmp_path / "sources.jsonl").write_text('{"docid": "d1", "facet": "f"}\n\n{"docid": 7, "source": "s"}\n')
    assert read_sources(tmp_path / "sources.jsonl") == {"d1": "f", "7": "s"}
    (tmp_path / "labels.tsv").write_text("q d1 0.5 -\nq d2 - 1\n")
    assert read_udcg_labels(tmp_path / "labels.tsv") == ({"q": {"d1": 0.5}}, {"q": {"d2": 1.0}})
    (tmp_path / "answers.jsonl").write_text('{"qid": "q1", "correct": true}\n{"qid": "q2", "correct": 0}\n')
    assert read_answers(tmp_path / "answers.jsonl") == {"q1": True, "q2": False}


@pytest.mark.parametrize("name, text, reader, message", [
    ("s.tsv", "d1 x\nd1 y\n", "read_sources", "s.tsv:2: document 'd1' is given a source twice"),
    ("s.tsv", "d1\n", "read_sources", "s.tsv:1: no source for document 'd1'"),
    ("l.tsv", "q d1 1.5 -\n", "read_udcg_labels", "l.tsv:1: utility 1.5 is outside [0, 1]"),
    ("l.tsv", "q d1 0.5\n", "read_udcg_labels", "l.tsv:1: expected 'qid docid utility distraction'"),
    ("l.tsv", "q d1 0.5 -\nq d1 - 0.5\n", "read_udcg_labels", "l.tsv:2: document 'd1' of query 'q' is labelled twice"),
    ("a.tsv", "q1 maybe\n", "read_answers", "a.tsv:1: correct is 'maybe'"),
    ("a.tsv", "q1 1\nq1 0\n", "read_answers", "a.tsv:2: query 'q1' is given twice"),
])
def test_label_readers_locate_bad_lines(tmp_path, name, text, reader, message):
    from steadyrank.metrics import io

    (tmp_path / name).write_text(text)
    with pytest.raises(io.FormatError, match=re.escape(message)):
        getattr(io, reader)(tmp_path / name)

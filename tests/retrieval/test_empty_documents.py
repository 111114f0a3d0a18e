"""Real BEIR corpora hold a few empty documents (Cranfield: 2 of 1,400): ``index build`` skips them
with a warning that counts and names them, records the count in the manifest, and ``--strict``
restores the refusal. Runs the CLI in-process with the real bundled MiniLM on a generated corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from steadyrank.retrieval.corpus import CorpusError, read_corpus, read_documents
from steadyrank.serve.cli.main import main
from tests.retrieval.helpers import synthetic_documents, write_corpus

EMPTY_IDS = ["d7", "d19"]


def corpus_with_empty(path: Path, n: int, empty_ids: list[str]) -> Path:
    """A BEIR ``corpus.jsonl`` of ``n`` generated documents whose ``empty_ids`` have blank texts."""
    write_corpus(path, synthetic_documents(n, seed=5))
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for number, record in enumerate(records):
        if record["_id"] in empty_ids:
            record["text"] = "" if number % 2 else "  \n "
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def beir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("beir-empty")
    corpus_with_empty(root / "corpus.jsonl", 30, EMPTY_IDS)
    return root


def test_read_corpus_skips_and_names_empty_documents(tmp_path: Path) -> None:
    ids = [f"d{i}" for i in range(3, 10)]
    source = corpus_with_empty(tmp_path / "corpus.jsonl", 12, ids)
    corpus = read_corpus(source, strict=False)
    assert corpus.skipped_empty == ids and len(corpus.documents) == 5
    assert all(d.id not in ids for d in corpus.documents)
    assert corpus.warning() == (
        f"skipped 7 empty document(s) of 12 in {source} (ids: 'd3', 'd4', 'd5', 'd6', 'd7', … 2 more); "
        "--strict refuses them"
    )
    with pytest.raises(CorpusError, match="(?s)7 error\\(s\\).*empty text for id 'd3'"):
        read_documents(source)


def test_all_empty_corpus_is_refused_even_when_skipping(tmp_path: Path) -> None:
    source = corpus_with_empty(tmp_path / "corpus.jsonl", 2, ["d0", "d1"])
    with pytest.raises(CorpusError, match="no documents \\(2 empty ones skipped\\)"):
        read_corpus(source, strict=False)


def test_build_skips_empty_documents_and_records_them(beir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "idx"
    capsys.readouterr()
    assert main(["index", "build", "--corpus", str(beir), "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    manifest = json.loads(captured.out)
    assert manifest["skipped_empty"] == 2 and manifest["live_count"] == 28 and manifest["count"] == 28
    assert (f"warning: skipped 2 empty document(s) of 30 in {beir / 'corpus.jsonl'} (ids: 'd7', 'd19'); "
            "--strict refuses them") in captured.err
    assert main(["index", "compact", "--index", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["skipped_empty"] == 2


def test_build_strict_refuses_empty_documents(beir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "idx"
    capsys.readouterr()
    assert main(["index", "build", "--corpus", str(beir), "--out", str(out), "--strict"]) == 2
    err = capsys.readouterr().err
    assert "2 error(s)" in err and "empty text for id 'd7'" in err and "empty text for id 'd19'" in err
    assert not (out / "CURRENT").exists()

"""The one corpus reader: every format (JSONL, .jsonl.gz, BEIR folders, TSV, CSV, Parquet), the
field options, the empty-document rule, and errors that name the file, the line and the field."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from steadyrank.metrics.io import FormatError
from steadyrank.retrieval.corpus import CorpusError, Document, Fields, read_corpus, read_documents, read_queries

RECORDS = [
    {"_id": "d1", "title": "Disk", "text": "free disk space with du", "metadata": {"url": "u1"}},
    {"_id": "d2", "title": "", "text": "list open ports with ss"},
    {"_id": "d3", "title": "Logs", "text": "read logs with journalctl"},
]
EXPECTED = [Document("d1", "free disk space with du", "Disk", {"url": "u1"}),
            Document("d2", "list open ports with ss"), Document("d3", "read logs with journalctl", "Logs")]


def jsonl(records: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode("utf-8")


def test_jsonl_gz_and_a_gzipped_file_named_jsonl(tmp_path: Path) -> None:
    (tmp_path / "corpus.jsonl.gz").write_bytes(gzip.compress(jsonl(RECORDS)))
    (tmp_path / "zipped.jsonl").write_bytes(gzip.compress(jsonl(RECORDS)))  # gzip is told by its magic bytes
    assert read_documents(tmp_path / "corpus.jsonl.gz") == EXPECTED
    assert read_documents(tmp_path / "zipped.jsonl") == EXPECTED


def test_beir_folder_with_jsonl_or_gz(tmp_path: Path) -> None:
    (tmp_path / "corpus.jsonl.gz").write_bytes(gzip.compress(jsonl(RECORDS)))
    (tmp_path / "queries.jsonl").write_bytes(jsonl([{"_id": "q1", "text": "free space"}]))
    assert read_documents(tmp_path) == EXPECTED
    assert read_queries(tmp_path) == {"q1": "free space"}
    with pytest.raises(FileNotFoundError, match=r"holds corpus.jsonl or corpus.jsonl.gz; none found"):
        read_documents((tmp_path / "empty").mkdir() or tmp_path / "empty")


def test_bad_utf8_in_a_gz_names_file_and_line(tmp_path: Path) -> None:
    raw = jsonl(RECORDS[:2]) + b'{"_id": "d3", "text": "caf\xe9"}\n'
    path = tmp_path / "corpus.jsonl.gz"
    path.write_bytes(gzip.compress(raw))
    with pytest.raises(FormatError, match=rf"^{path}:3: not UTF-8: byte 0xe9 at column 27"):
        read_documents(path)


def test_truncated_gzip_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl.gz"
    path.write_bytes(gzip.compress(jsonl(RECORDS * 50))[:-40])
    with pytest.raises(FormatError, match=rf"^{path}:\d+: corrupt or truncated gzip data"):
        read_documents(path)


def test_pyserini_contents_needs_text_field(tmp_path: Path) -> None:
    path = tmp_path / "pyserini.jsonl"
    path.write_bytes(jsonl([{"id": "doc1", "contents": "free disk space"}, {"id": "doc2", "contents": "ports"}]))
    with pytest.raises(CorpusError) as info:
        read_documents(path)
    assert f"{path}:1: missing field 'text' (use --text-field; fields here: 'id', 'contents')" in str(info.value)
    assert read_documents(path, Fields(text="contents")) == [Document("doc1", "free disk space"), Document("doc2", "ports")]


def test_id_and_title_fields(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(jsonl([{"docid": 7, "headline": "H", "body": "b"}]))
    fields = Fields(id="docid", text="body", title="headline")
    assert read_documents(path, fields) == [Document("7", "b", "H")]
    with pytest.raises(CorpusError, match=r"c.jsonl:1: missing field 'heading' \(use --title-field"):
        read_documents(path, Fields(id="docid", text="body", title="heading"))
    with pytest.raises(CorpusError, match=r"c.jsonl:1: missing field '_id' or 'id' \(use --id-field"):
        read_documents(path, Fields(text="body"))


def test_tsv_without_header_is_id_and_text(tmp_path: Path) -> None:
    """MS MARCO's collection.tsv and queries.tsv: ``id<TAB>text``, no header, quotes are text."""
    path = tmp_path / "collection.tsv"
    path.write_text('0\tthe "presence" of communication\n1\tManhattan project\n', encoding="utf-8")
    assert read_documents(path) == [Document("0", 'the "presence" of communication'), Document("1", "Manhattan project")]
    queries = tmp_path / "queries.dev.tsv"
    queries.write_text("1048585\twhat is paula deen's brother\n", encoding="utf-8")
    assert read_queries(queries) == {"1048585": "what is paula deen's brother"}


def test_tsv_with_header_and_a_bad_row(tmp_path: Path) -> None:
    path = tmp_path / "c.tsv"
    path.write_text("docid\ttitle\tbody\nd1\tT\tfirst\nd2\tsecond\n", encoding="utf-8")
    with pytest.raises(FormatError, match=rf"^{path}:3: 2 column\(s\), the header has 3 \(docid, title, body\)"):
        read_documents(path, Fields(id="docid", text="body"))
    path.write_text("docid\ttitle\tbody\nd1\tT\tfirst\n", encoding="utf-8")
    assert read_documents(path, Fields(id="docid", text="body")) == [Document("d1", "first", "T")]


def test_csv_quoting_and_multiline_fields(tmp_path: Path) -> None:
    path = tmp_path / "c.csv.gz"
    path.write_bytes(gzip.compress(b'id,title,text\nd1,"Disk, space","line one\nline two"\nd2,,"say ""hi"""\n'))
    assert read_documents(path) == [Document("d1", "line one\nline two", "Disk, space"), Document("d2", 'say "hi"')]
    bad = tmp_path / "bad.csv"
    bad.write_text('id,text\nd1,"unterminated\n', encoding="utf-8")
    with pytest.raises(FormatError, match=rf"^{bad}:2: bad CSV"):
        read_documents(bad)


def test_parquet_rows_and_errors_name_the_row(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"pid": [1, 2, 3], "passage": ["alpha", None, "gamma"]}), path)
    corpus = read_corpus(path, strict=False, fields=Fields(id="pid", text="passage"))
    assert corpus.documents == [Document("1", "alpha"), Document("3", "gamma")] and corpus.skipped_empty == ["2"]
    with pytest.raises(CorpusError, match=rf"{path} row 2: empty text for id '2' \(field 'passage'"):
        read_corpus(path, strict=True, fields=Fields(id="pid", text="passage"))
    pq.write_table(pa.table({"pid": [1], "passage": [5]}), path)
    with pytest.raises(CorpusError, match=rf"{path} row 1: field 'passage' must be a string, got int"):
        read_documents(path, Fields(id="pid", text="passage"))


def test_unknown_format_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "corpus.xml"
    path.write_text("<doc/>", encoding="utf-8")
    with pytest.raises(FormatError, match=r"corpus.xml: unknown corpus format"):
        read_documents(path)
    with pytest.raises(FileNotFoundError, match=r"nope.jsonl: no such file or folder"):
        read_documents(tmp_path / "nope.jsonl")


def test_empty_rule_is_the_same_in_every_format(tmp_path: Path) -> None:
    """A blank text (empty, whitespace or null) is skipped and counted, or refused when strict."""
    tsv = tmp_path / "c.tsv"
    tsv.write_text("id\ttext\n471\t \n472\tbody\n995\t\n", encoding="utf-8")
    jsonl_path = tmp_path / "c.jsonl"
    jsonl_path.write_bytes(jsonl([{"_id": "471", "text": " "}, {"_id": "472", "text": "body"}, {"_id": "995", "text": None}]))
    for path, line in ((tsv, 2), (jsonl_path, 1)):
        corpus = read_corpus(path, strict=False)
        assert corpus.skipped_empty == ["471", "995"] and [d.id for d in corpus.documents] == ["472"]
        assert corpus.warning() == (f"skipped 2 empty document(s) of 3 in {path} (ids: '471', '995'); "
                                    "--strict refuses them")
        with pytest.raises(CorpusError, match=rf"2 error\(s\).*\n{path}:{line}: empty text for id '471' \(field 'text'"):
            read_corpus(path, strict=True)

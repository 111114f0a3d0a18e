"""The write-ahead log under failed writes: truncate back, refuse until reopened, never reuse a seq;
a torn tail is dropped, a bad record followed by good ones is corruption.

Failed writes come from :mod:`tests.retrieval.faults` (a stand-in for a full or failing disk).
"""

from __future__ import annotations

import logging

import pytest

from steadyrank.retrieval.fsio import IndexWriteError
from steadyrank.retrieval.store import IndexStore, build_index
from steadyrank.retrieval.wal import WalCorruptError, WriteAheadLog, encode_record, read_log
from tests.retrieval.faults import Faults
from tests.retrieval.helpers import HashEmbedder, synthetic_documents


def _wal(path):
    return next(path.glob("gen-*")) / "wal.jsonl"


@pytest.fixture
def index(tmp_path):
    path = tmp_path / "idx"
    build_index(path, synthetic_documents(40), HashEmbedder())
    return path


def test_short_write_then_disk_full_truncates_back_and_refuses_until_reopened(index):
    """The issue's reproduction: a short write followed by ENOSPC used to leave the partial bytes,
    the next acknowledged delete was appended after them and the index no longer opened."""
    with IndexStore.open(index, HashEmbedder(), writable=True) as store:
        store.delete(["d0"])
        good = _wal(index).stat().st_size
        with Faults("write", 0, "full"), pytest.raises(IndexWriteError, match="nothing was deleted.*No space left"):
            store.delete(["d1"])
        assert _wal(index).stat().st_size == good  # the partial record is gone
        with pytest.raises(IndexWriteError, match="refusing further changes until the index is reopened"):
            store.delete(["d2"])  # the disk has room again, but this writer stays refused
        assert "d1" in store and "d2" in store
    with IndexStore.open(index, HashEmbedder(), writable=True) as store:
        assert "d0" not in store and "d1" in store
        store.delete(["d2"])  # acknowledged after the reopen
    with IndexStore.open(index, HashEmbedder()) as store:
        assert "d2" not in store and store.info()["wal_records"] == 2


def test_failed_fsync_refuses_and_never_reuses_a_sequence_number(index):
    with IndexStore.open(index, HashEmbedder(), writable=True) as store:
        store.delete(["d0"])
        with Faults("fsync", 0), pytest.raises(IndexWriteError, match="Input/output error"):
            store.delete(["d1"])
        with pytest.raises(IndexWriteError):
            store.delete(["d2"])
    records, _ = read_log(_wal(index))
    assert [r["seq"] for r in records] == [1]
    with IndexStore.open(index, HashEmbedder(), writable=True) as store:
        store.delete(["d3"])
    assert [r["seq"] for r in read_log(_wal(index))[0]] == [1, 2]


def test_bad_checksum_on_the_final_record_is_a_torn_tail(tmp_path, caplog):
    path = tmp_path / "wal.jsonl"
    first, second = encode_record({"seq": 1, "op": "delete", "ids": ["a"]}), encode_record({"seq": 2, "op": "delete", "ids": ["b"]})
    torn = second.replace(b'"b"', b'"c"')  # complete line, wrong bytes: a multi-page write cut part-way
    path.write_bytes(first + torn)
    with caplog.at_level(logging.WARNING, logger="steadyrank.retrieval.wal"):
        records, length = read_log(path)
    assert [r["ids"] for r in records] == [["a"]] and length == len(first)
    assert "torn tail" in caplog.text
    WriteAheadLog(path, length, next_seq=2).close()  # the next writer truncates it
    assert path.read_bytes() == first


def test_bad_record_followed_by_good_ones_is_corruption(tmp_path):
    path = tmp_path / "wal.jsonl"
    records = [encode_record({"seq": n, "op": "delete", "ids": [str(n)]}) for n in (1, 2, 3)]
    path.write_bytes(records[0] + records[1].replace(b'"2"]', b'"9"]') + records[2])
    with pytest.raises(WalCorruptError, match="record 2: unreadable or fails its checksum, and more records follow"):
        read_log(path)


def test_cli_add_on_a_full_disk_says_nothing_was_added_in_one_line(index, tmp_path, monkeypatch, capsys):
    """``steadyrank index add`` when the disk fills: one line, exit code 2, nothing added."""
    from steadyrank.serve.cli.commands import index as index_command
    from steadyrank.serve.cli.main import main

    monkeypatch.setattr(index_command, "load_embedder_arg", lambda path, precision="auto", prompts=None: HashEmbedder())
    docs = tmp_path / "more.jsonl"
    docs.write_text('{"_id": "x1", "text": "a new document about glaciers"}\n')
    with Faults("write", 0, "full"):
        code = main(["index", "add", "--index", str(index), "--docs", str(docs)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("steadyrank index: error: nothing was added:") and "No space left on device" in err[-1]
    assert not any("Traceback" in line for line in err)
    with IndexStore.open(index, HashEmbedder()) as store:
        assert "x1" not in store and store.count == 40

"""Fault injection at every I/O call of add, delete, compact and build, single and sharded (no Ray).

The failing disk is a stand-in (:mod:`tests.retrieval.faults`): a full disk or an I/O error cannot be
produced on demand here. For each scenario a clean run counts its ``write``/``fsync``/``rename``
calls; then every call index of every kind is failed in turn (EIO once; for writes also a disk that
fills up mid-write: a short write, then ENOSPC for good) on a fresh copy of the index. After each
fault, with the disk healthy again:

- the index opens (read-only, and writable: a torn tail is dropped, statistics recomputed);
- every acknowledged write (a call that returned) is present, documents with their texts;
- every unacknowledged write is wholly present or wholly absent (per shard, for a batch spanning
  shards: each shard's part is durable on its own), and nothing else changed;
- dense, BM25 and hybrid search answer from live documents only;
- a writer reopened after the fault adds a document that the next reader sees.

A build is acknowledged when it returns; after a fault the directory holds exactly the old index or
exactly the new one, never a mix (for the sharded build, of different shard counts). The totals
(faults injected, acknowledged writes checked) are printed in pytest's summary.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.index import open_index
from steadyrank.retrieval.shards import ShardedIndex, build_sharded_index, shard_of
from steadyrank.retrieval.store import build_index
from tests.retrieval.faults import KINDS, MODES, Faults
from tests.retrieval.helpers import HashEmbedder, synthetic_documents

#: faults injected and acknowledged writes checked, over the whole module (printed by conftest)
TOTALS: Counter[str] = Counter()

BASE = synthetic_documents(24, seed=5, prefix="b")
NEW = synthetic_documents(10, seed=6, prefix="n")
SHARDS = 2
Op = tuple[str, list[str]]  # ("add" | "delete" | "compact", ids)


def _build(path: Path, documents: list[Document], sharded: bool, shards: int = SHARDS) -> None:
    if sharded:
        build_sharded_index(path, documents, HashEmbedder(), shards=shards, overwrite=True)
    else:
        build_index(path, documents, HashEmbedder(), overwrite=True)


def _run(path: Path, ops: list[Op], faults: Faults) -> list[bool]:
    """Apply ``ops`` to the writable index at ``path`` with ``faults`` active; which returned."""
    by_id = {d.id: d for d in BASE + NEW}
    acked = []
    with open_index(path, HashEmbedder(), writable=True) as index, faults:
        for op, ids in ops:
            try:
                if op == "add":
                    index.add([by_id[i] for i in ids])
                elif op == "delete":
                    index.delete(ids)
                else:
                    index.compact()
                acked.append(True)
            except (OSError, RuntimeError, KeyError, ValueError):
                acked.append(False)
    return acked


def _observe(path: Path) -> dict[str, str]:
    """Every known document the index holds, with its text (and the index's count agreeing)."""
    with open_index(path, HashEmbedder()) as index:
        seen = {i: index.document(i).text for i in (d.id for d in BASE + NEW) if i in index}
        assert index.count == len(seen)
        for mode in ("dense", "bm25", "hybrid"):
            assert set(index.search("the glacier measures ocean temperature", mode=mode, depth=50).doc_ids) <= set(seen)
    return seen


def _groups(ids: list[str], sharded: bool) -> list[list[str]]:
    """The parts of a batch that are all-or-nothing: the whole batch, or each shard's part."""
    if not sharded:
        return [ids]
    parts: dict[int, list[str]] = {}
    for doc_id in ids:
        parts.setdefault(shard_of(doc_id, SHARDS), []).append(doc_id)
    return list(parts.values())


def _check(path: Path, ops: list[Op], acked: list[bool], sharded: bool) -> None:
    seen = _observe(path)
    text = {d.id: d.text for d in BASE + NEW}
    expected = {d.id for d in BASE}
    for (op, ids), done in zip(ops, acked, strict=True):
        if op == "compact":
            TOTALS["acknowledged"] += done
            continue
        for part in _groups(ids, sharded):
            present = [i in seen for i in part]
            if done:
                assert all(present) if op == "add" else not any(present), (op, part, "acknowledged")
            else:
                assert all(present) or not any(present), (op, part, "half-applied")
            if all(present):
                expected |= set(part)
            else:
                expected -= set(part)
        TOTALS["acknowledged"] += done
    assert set(seen) == expected
    assert all(seen[i] == text[i] for i in seen)
    after = Document("after-fault", "written by a writer reopened after the fault about glaciers")
    with open_index(path, HashEmbedder(), writable=True) as index:
        index.add([after])
    with open_index(path, HashEmbedder()) as index:
        assert "after-fault" in index


def _inject_everywhere(template: Path, work: Path, attempt: Callable[[Path, Faults], Any],
                       check: Callable[[Path, Any], None]) -> None:
    """Count the calls of ``attempt`` in a clean run, then fail each call index of each kind in
    turn on a fresh copy of ``template`` and ``check`` the outcome."""
    counting = Faults()
    shutil.copytree(template, work)
    check(work, attempt(work, counting))
    shutil.rmtree(work)
    assert counting.calls["write"] and counting.calls["fsync"], counting.calls  # (adds and deletes rename nothing)
    for kind in KINDS:
        for mode in MODES[kind]:
            for at in range(counting.calls[kind]):
                faults = Faults(kind, at, mode)
                shutil.copytree(template, work)
                outcome = attempt(work, faults)
                assert faults.injected, (kind, mode, at)
                TOTALS["faults"] += 1
                check(work, outcome)
                shutil.rmtree(work)


@pytest.mark.parametrize("sharded", [False, True], ids=["single", "sharded"])
def test_faults_during_adds_and_deletes(tmp_path, sharded):
    template = tmp_path / "template"
    _build(template, BASE, sharded)
    ops: list[Op] = [("add", ["n0", "n1", "n2", "n3"]), ("delete", ["b0", "b1", "b2"]),
                     ("add", ["n4"]), ("delete", ["b3"])]
    _inject_everywhere(template, tmp_path / "work", lambda p, f: _run(p, ops, f),
                       lambda p, acked: _check(p, ops, acked, sharded))


@pytest.mark.parametrize("sharded", [False, True], ids=["single", "sharded"])
def test_faults_during_compaction(tmp_path, sharded):
    template = tmp_path / "template"
    _build(template, BASE, sharded)
    prepared: list[Op] = [("add", ["n5", "n6", "n7"]), ("delete", ["b4", "b5"])]
    assert all(_run(template, prepared, Faults()))
    ops: list[Op] = [("compact", []), ("add", ["n0", "n1"]), ("delete", ["b6"])]

    def check(path: Path, acked: list[bool]) -> None:
        _check(path, prepared + ops, [True, True, *acked], sharded)

    _inject_everywhere(template, tmp_path / "work", lambda p, f: _run(p, ops, f), check)


@pytest.mark.parametrize("sharded", [False, True], ids=["single", "sharded"])
def test_faults_during_build_overwrite(tmp_path, sharded):
    """An overwrite cut by a fault leaves exactly the old index (the sharded one: 2 shards) or
    exactly the new one (3 shards), never a mix."""
    template = tmp_path / "template"
    _build(template, BASE, sharded)
    new = synthetic_documents(16, seed=8, prefix="n")
    old_state = {d.id: d.text for d in BASE}
    new_state = {d.id: d.text for d in new}

    def attempt(path: Path, faults: Faults) -> bool:
        try:
            with faults:
                _build(path, new, sharded, shards=3)
        except (OSError, RuntimeError):
            return False
        return True

    def check(path: Path, acked: bool) -> None:
        with open_index(path, HashEmbedder()) as index:
            seen = {i: index.document(i).text for i in [*old_state, *new_state] if i in index}
            assert index.count == len(seen)
            if isinstance(index, ShardedIndex):
                assert len(index.shards) == (3 if seen == new_state else SHARDS)
            assert index.search("report 3", mode="hybrid", depth=10).doc_ids
        assert seen == new_state if acked else seen in (old_state, new_state)
        TOTALS["acknowledged"] += acked
        _build(path, BASE, sharded)  # a later build over whatever the fault left succeeds

    _inject_everywhere(template, tmp_path / "work", attempt, check)

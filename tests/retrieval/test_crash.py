"""Crash safety with real processes killed by SIGKILL: builds, compactions, adds and deletes."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from steadyrank.retrieval.store import IndexStore, build_index
from tests.retrieval.helpers import HashEmbedder, start_python, synthetic_documents

pytestmark = pytest.mark.e2e  # each test kills a writer process

QUERY = "the glacier measures ocean temperature"

BUILD_SCRIPT = """
import sys
from steadyrank.retrieval.dense import DenseSettings
from steadyrank.retrieval.store import build_index
from tests.retrieval.helpers import HashEmbedder, synthetic_documents
docs = synthetic_documents({n}, seed=99, prefix="new")
def progress(done):
    print("progress", flush=True)
print("ready", flush=True)
build_index({path!r}, docs, HashEmbedder(), dense=DenseSettings({factory!r}, ef_construction=40), batch_size=500,
            on_progress=progress, overwrite=True)
print("done", flush=True)
"""


def fingerprint(path: Path) -> tuple:
    """What a reader sees: count, manifest generation and one query's results in two modes."""
    with IndexStore.open(path, HashEmbedder()) as store:
        dense = store.search(QUERY, mode="dense", depth=10)
        bm25 = store.search(QUERY, mode="bm25", depth=10)
        return store.count, store.manifest["generation"], dense.doc_ids, bm25.doc_ids


@pytest.fixture
def old_index(tmp_path) -> Path:
    path = tmp_path / "idx"
    build_index(path, synthetic_documents(300, seed=5, prefix="old"), HashEmbedder())
    return path


def kill(process) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def wait_for_line(process, expected: str) -> None:
    for line in process.stdout:
        if line.strip() == expected:
            return
    raise AssertionError(f"subprocess ended before printing {expected!r}: {process.stderr.read()}")


def test_build_killed_while_embedding_leaves_previous_index(old_index):
    before = fingerprint(old_index)
    process = start_python(BUILD_SCRIPT.format(n=20000, path=str(old_index), factory="Flat"))
    wait_for_line(process, "progress")  # the first of 40 batches is embedded
    kill(process)
    assert fingerprint(old_index) == before


def test_build_killed_while_writing_leaves_previous_index_then_rebuild_cleans_up(old_index):
    before = fingerprint(old_index)
    process = start_python(BUILD_SCRIPT.format(n=8000, path=str(old_index), factory="Flat"))
    wait_for_line(process, "ready")
    deadline = time.monotonic() + 120
    while not any(p.name.startswith(".tmp-") for p in old_index.iterdir()):  # the new generation is being written
        assert process.poll() is None, process.stderr.read()
        assert time.monotonic() < deadline
        time.sleep(0.001)
    kill(process)
    assert any(p.name.startswith(".tmp-") for p in old_index.iterdir())  # half-written, never made live
    assert fingerprint(old_index) == before
    build_index(old_index, synthetic_documents(50, seed=6, prefix="again"), HashEmbedder(), overwrite=True)
    assert fingerprint(old_index)[0] == 50
    assert sorted(p.name for p in old_index.iterdir()) == ["CURRENT", "LOCK", "gen-000002"]


def kill_at_moments(script: str, observe, delays: tuple[float, ...], is_new) -> set[str]:
    """Run ``script`` and kill it ``delay`` s after it is ready, for each delay until the new index
    shows; after each kill the state ``observe`` sees must be the old one or ``is_new``. Returns the
    outcomes seen."""
    before = observe()
    outcomes = set()
    for delay in delays:
        process = start_python(script)
        wait_for_line(process, "ready")
        time.sleep(delay)
        if process.poll() is None:
            kill(process)
        state = observe()
        outcomes.add("old" if state == before else "new")
        assert state == before or is_new(state), state
        if state != before:
            break
    return outcomes


def test_build_killed_at_random_moments_is_old_or_new_never_broken(old_index):
    outcomes = kill_at_moments(
        BUILD_SCRIPT.format(n=2000, path=str(old_index), factory="HNSW32,Flat"), lambda: fingerprint(old_index),
        (0.0, 0.3, 0.8, 2.0), lambda state: state[0] == 2000 and state[2][0].startswith("new"),
    )
    assert "old" in outcomes


MUTATE_SCRIPT = """
from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.store import IndexStore
from tests.retrieval.helpers import HashEmbedder
store = IndexStore.open({path!r}, HashEmbedder(), writable=True)
i = 0
while True:
    batch = [Document(f"added{{i}}-{{j}}", f"acknowledged document {{i}} {{j}} about glaciers") for j in range(5)]
    store.add(batch)
    print("added", *[d.id for d in batch], flush=True)
    store.delete([f"old{{i}}"])
    print("deleted", f"old{{i}}", flush=True)
    i += 1
"""


def test_adds_and_deletes_survive_a_kill(old_index):
    process = start_python(MUTATE_SCRIPT.format(path=str(old_index)))
    added, deleted = [], []
    for line in process.stdout:
        kind, *ids = line.split()
        (added if kind == "added" else deleted).extend(ids)
        if len(deleted) == 40:
            break
    kill(process)  # the writer keeps going until the kill, so it usually dies inside an add or delete
    with IndexStore.open(old_index, HashEmbedder(), writable=True) as store:  # the kill released the lock
        assert all(doc_id in store for doc_id in added)
        assert not any(doc_id in store for doc_id in deleted)
        logged = store.info()["wal_records"]
        assert logged >= len(added) // 5 + len(deleted)  # every acknowledged operation is in the log
        assert store.search("glaciers", mode="hybrid", depth=5).doc_ids
        store.add(synthetic_documents(3, seed=1, prefix="after"))
    with IndexStore.open(old_index, HashEmbedder()) as store:
        assert store.info()["wal_records"] == logged + 1 and "after0" in store


COMPACT_SCRIPT = """
from steadyrank.retrieval.store import IndexStore
from tests.retrieval.helpers import HashEmbedder
store = IndexStore.open({path!r}, HashEmbedder(), writable=True)
print("ready", flush=True)
store.compact()
print("done", flush=True)
"""


def test_compaction_killed_while_writing_loses_nothing(tmp_path):
    path = tmp_path / "idx"
    build_index(path, synthetic_documents(8000, seed=3, prefix="old"), HashEmbedder())
    with IndexStore.open(path, HashEmbedder(), writable=True) as store:
        store.add(synthetic_documents(20, seed=4, prefix="fresh"))
        store.delete(["old1", "old2"])
    before = fingerprint(path)
    process = start_python(COMPACT_SCRIPT.format(path=str(path)))
    wait_for_line(process, "ready")
    deadline = time.monotonic() + 120
    while not any(p.name.startswith(".tmp-") for p in path.iterdir()):
        assert process.poll() is None, process.stderr.read()
        assert time.monotonic() < deadline
        time.sleep(0.001)
    kill(process)
    assert fingerprint(path) == before
    with IndexStore.open(path, HashEmbedder()) as store:
        assert "fresh0" in store and "old1" not in store and store.info()["wal_records"] == 2


SHARDED_BUILD_SCRIPT = """
from steadyrank.retrieval.shards import build_sharded_index
from tests.retrieval.helpers import HashEmbedder, synthetic_documents

docs = synthetic_documents({n}, seed=99, prefix="new")
print("ready", flush=True)
build_sharded_index({path!r}, docs, HashEmbedder(), shards=2, batch_size=500, overwrite=True)
print("done", flush=True)
"""


def sharded_fingerprint(path: Path) -> tuple:
    """What a reader of a sharded index sees: shard count, count, and one query's results."""
    from steadyrank.retrieval.shards import ShardedIndex

    with ShardedIndex.open(path, HashEmbedder()) as index:
        dense = index.search(QUERY, mode="dense", depth=10)
        bm25 = index.search(QUERY, mode="bm25", depth=10)
        return len(index.shards), index.count, dense.doc_ids, bm25.doc_ids


def test_sharded_overwrite_killed_at_any_moment_is_old_or_new_never_mixed(tmp_path):
    """An overwrite from 3 shards to 2, killed while writing the new set: the old index stays whole
    (its 3 shards, its statistics); a later writer removes the half-written set."""
    from steadyrank.retrieval.shards import ShardedIndex, build_sharded_index

    path = tmp_path / "sharded"
    build_sharded_index(path, synthetic_documents(300, seed=5, prefix="old"), HashEmbedder(), shards=3)
    before = sharded_fingerprint(path)
    process = start_python(SHARDED_BUILD_SCRIPT.format(n=8000, path=str(path)))
    wait_for_line(process, "ready")
    deadline = time.monotonic() + 120
    while not any(path.glob("set-000002/shard-*/.tmp-*")):  # a new shard's generation being written
        assert process.poll() is None, process.stderr.read()
        assert time.monotonic() < deadline
        time.sleep(0.001)
    kill(process)
    assert sharded_fingerprint(path) == before
    with ShardedIndex.open(path, HashEmbedder(), writable=True):
        pass
    assert not (path / "set-000002").exists()
    outcomes = kill_at_moments(
        SHARDED_BUILD_SCRIPT.format(n=3000, path=str(path)), lambda: sharded_fingerprint(path), (0.0, 0.5, 1.5, 4.0),
        lambda state: state[:2] == (2, 3000) and state[2][0].startswith("new"),
    )
    assert "old" in outcomes

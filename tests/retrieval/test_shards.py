"""Sharded index: the scatter-gather merge equals the unsharded index (Flat dense, BM25 with
corpus-wide statistics, hybrid RRF) — ids, scores and order — before and after adds, deletes,
reopening and compaction; mutations route to the owning shard; deadlines never drop shards silently.

Real FAISS and real bm25s; the embedder is the deterministic ``HashEmbedder`` (a real bi-encoder,
see ``helpers.py``) made batch-sensitive the way a transformer is: a text's vector differs in its
last bits with the batch it is embedded in (padding changes the float rounding; the bundled MiniLM
differs by up to 1e-7 between batches). Sharded and unsharded builds must therefore embed in the
same batches for their scores to be equal bit for bit.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.shards import (
    ShardAnswer,
    ShardedIndex,
    ShardHits,
    ShardsIncomplete,
    answer_from_store,
    build_sharded_index,
    merge_answers,
    open_shard,
    read_shards_manifest,
    scatter_gather,
    shard_of,
)
from steadyrank.retrieval.store import IndexIntegrityError, IndexStore, build_index
from tests.retrieval.helpers import HashEmbedder, synthetic_documents

QUERIES = [
    "the river measures interest rates", "glacier bakery near the equator", "compiler memory leaks night skies",
    "report 17", "volcano earthquake risk on mars", "tax policy", "honeybee colony feeds wheat harvests",
]
MODES = ("dense", "bm25", "hybrid")


class BatchSensitiveEmbedder(HashEmbedder):
    """``HashEmbedder`` whose vectors are scaled by 1 + 2⁻²²·(batch size): unit norm within 1e-4,
    different low bits for every batch size."""

    def encode(self, texts: list[str], *, prompt: str = "", show_progress: bool = False) -> np.ndarray:
        vectors = super().encode(texts, prompt=prompt, show_progress=show_progress)
        return vectors * np.float32(1 + len(texts) * 2.0**-22)


@pytest.fixture
def embedder() -> HashEmbedder:
    return BatchSensitiveEmbedder()


def assert_same(unsharded: IndexStore, sharded: ShardedIndex, depth: int = 60) -> None:
    for query in QUERIES:
        for mode in MODES:
            want = unsharded.search(query, mode=mode, depth=depth)
            got = sharded.search(query, mode=mode, depth=depth)
            assert got.doc_ids == want.doc_ids, (query, mode)
            assert np.array_equal(np.asarray(got.scores), np.asarray(want.scores)), (query, mode)
            assert got.scores.dtype == want.scores.dtype


@pytest.fixture
def pair(tmp_path, embedder, documents):
    build_index(tmp_path / "flat", documents, embedder)
    build_sharded_index(tmp_path / "sharded", documents, embedder, shards=3)
    return tmp_path / "flat", tmp_path / "sharded"


def test_assignment_is_stable_and_documented(pair, embedder, documents):
    _, sharded = pair
    with ShardedIndex.open(sharded, embedder) as index:
        sizes = [s.count for s in index.shards]
        for i, shard in enumerate(index.shards):
            assert all(shard_of(d.id, 3) == i for d in documents if d.id in shard)
    assert sum(sizes) == len(documents) and min(sizes) > 0
    assert shard_of("d0", 3) == int.from_bytes(__import__("hashlib").sha256(b"d0").digest()[:8], "big") % 3


def test_sharded_equals_unsharded_flat_bm25_hybrid(pair, embedder):
    flat, sharded = pair
    with IndexStore.open(flat, embedder) as a, ShardedIndex.open(sharded, embedder) as b:
        assert b.count == a.count
        assert_same(a, b)
        # depth beyond the corpus: every positive BM25 score, every vector
        assert_same(a, b, depth=500)
        ids = a.search(QUERIES[0], mode="dense", depth=30).doc_ids
        assert np.array_equal(b.vectors(ids), a.vectors(ids))  # stored-vector reranking reads these


def test_bm25_scores_use_corpus_wide_statistics(pair, embedder):
    """Scored alone (its own N, df, avgdl), a shard gives other scores; with the corpus-wide
    statistics it gives the unsharded ones."""
    flat, sharded = pair
    shard_dir = sharded / read_shards_manifest(sharded)["dirs"][1]
    with IndexStore.open(flat) as whole, open_shard(sharded, 1) as shard:
        want = whole.search("tax policy in small towns", mode="bm25", depth=500)
        got = shard.search("tax policy in small towns", mode="bm25", depth=500)
        wanted = dict(zip(want.doc_ids, want.scores.tolist(), strict=True))
        assert got.doc_ids and all(wanted[i] == s for i, s in zip(got.doc_ids, got.scores.tolist(), strict=True))
    from steadyrank.retrieval.bm25 import Bm25Index, Bm25Settings

    with IndexStore.open(shard_dir) as raw:
        texts = raw.live_texts()
    alone = Bm25Index.build(texts, np.arange(len(texts)), Bm25Settings())
    scores, _ = alone.search("tax policy in small towns", 500)
    assert not np.array_equal(np.sort(scores), np.sort(got.scores))


def test_mutations_route_to_owner_and_stay_equal(pair, embedder):
    flat, sharded = pair
    extra = synthetic_documents(40, seed=99, prefix="new")
    gone = ["d3", "d10", "d111", "new5"]
    with IndexStore.open(flat, embedder, writable=True) as a, ShardedIndex.open(sharded, embedder, writable=True) as b:
        before = [s.count for s in b.shards]
        assert a.add(extra) == b.add(extra) == 40
        owners = [sum(shard_of(d.id, 3) == i for d in extra) for i in range(3)]
        assert [s.count for s in b.shards] == [n + k for n, k in zip(before, owners, strict=True)]
        assert a.delete(gone) == b.delete(gone) == 4
        assert "d3" not in b and "new0" in b and b.document("new0").text == extra[0].text
        with pytest.raises(ValueError, match="already in the index"):
            b.add(extra[:1])
        with pytest.raises(KeyError):
            b.delete(["d3"])
        assert_same(a, b)
    # durable: a fresh reader (write-ahead logs replayed, statistics file trusted) sees the same
    with IndexStore.open(flat, embedder) as a, ShardedIndex.open(sharded, embedder) as b:
        assert_same(a, b)
        assert b.info()["wal_records"] > 0
    with IndexStore.open(flat, embedder, writable=True) as a, ShardedIndex.open(sharded, embedder, writable=True) as b:
        a.compact()
        b.compact()
        assert b.info()["wal_records"] == 0
        assert_same(a, b)


def test_one_shard_reader_refuses_stale_statistics_and_a_writer_repairs(pair, embedder):
    _, sharded = pair
    # a change behind the sharded index's back (as a crash between WAL append and statistics write leaves)
    with IndexStore.open(sharded / read_shards_manifest(sharded)["dirs"][2], writable=True) as shard:
        shard.delete([shard.live_texts and next(iter(shard._live))])
    with pytest.raises(IndexIntegrityError, match="do not match"):
        open_shard(sharded, 0)
    with ShardedIndex.open(sharded, embedder, writable=True):
        pass  # recomputes and stores the statistics
    open_shard(sharded, 0).close()


def _answer(ids: list[str], scores: list[float], seqs: list[int]) -> ShardAnswer:
    hits = ShardHits(ids, np.asarray(scores, dtype=np.float32), seqs)
    return ShardAnswer(hits, None, {i: Document(i, f"text {i}") for i in ids})


def test_merge_orders_by_score_then_seq():
    found, _ = merge_answers(
        [_answer(["a", "c"], [0.9, 0.5], [4, 0]), _answer(["b", "d"], [0.9, 0.7], [1, 2])], "dense", 3
    )
    assert found.doc_ids == ["b", "a", "d"]
    assert found.scores.tolist() == pytest.approx([0.9, 0.9, 0.7])


def test_scatter_gather_deadline_fails_loudly_or_reports_partial():
    async def fast(answer: ShardAnswer) -> ShardAnswer:
        return answer

    async def slow() -> ShardAnswer:
        await asyncio.sleep(5)
        raise AssertionError("cancelled before this")

    async def broken() -> ShardAnswer:
        raise RuntimeError("replica died")

    one, two = _answer(["a"], [0.5], [0]), _answer(["b"], [0.6], [1])
    calls = [lambda: fast(one), slow, lambda: fast(two)]
    with pytest.raises(ShardsIncomplete, match="shard 1: no answer within 0.2 s"):
        asyncio.run(scatter_gather(calls, mode="dense", depth=5, timeout_s=0.2))
    partial = asyncio.run(scatter_gather(calls, mode="dense", depth=5, timeout_s=0.2, partial_ok=True))
    assert partial.partial and set(partial.missing) == {1}
    assert partial.candidates.doc_ids == ["b", "a"] and set(partial.documents) == {"a", "b"}
    assert partial.pool().missing_shards == (1,) and partial.pool().doc_ids == ["b", "a"]
    async def own_deadline() -> ShardAnswer:  # a call bounded by its own wait_for, ending first
        return await asyncio.wait_for(asyncio.sleep(5), timeout=0.05)

    with pytest.raises(ShardsIncomplete, match="shard 1: no answer within 1 s"):
        asyncio.run(scatter_gather([lambda: fast(one), own_deadline], mode="dense", depth=5, timeout_s=1))
    with pytest.raises(ShardsIncomplete, match="RuntimeError: replica died"):
        asyncio.run(scatter_gather([lambda: fast(one), broken], mode="dense", depth=5, timeout_s=1))
    whole = asyncio.run(scatter_gather([lambda: fast(one), lambda: fast(two)], mode="dense", depth=5, timeout_s=1))
    assert not whole.partial and whole.candidates.doc_ids == ["b", "a"]


def test_scatter_gather_over_shard_stores_equals_unsharded(pair, embedder):
    flat, sharded = pair
    with IndexStore.open(flat, embedder) as whole:
        stores = [open_shard(sharded, i, embedder) for i in range(3)]
        try:
            for query in QUERIES[:3]:
                vector = whole.encode_query(query)
                want = whole.search(query, mode="hybrid", depth=40, vector=vector)

                def call(store: IndexStore, q: str = query, v: np.ndarray = vector):
                    return asyncio.to_thread(answer_from_store, store, q, mode="hybrid", depth=40, vector=v,
                                             with_vectors=True)

                got = asyncio.run(scatter_gather([lambda s=s: call(s) for s in stores], mode="hybrid", depth=40,
                                                 timeout_s=30))
                assert got.candidates.doc_ids == want.doc_ids
                assert np.array_equal(got.candidates.scores, want.scores)
                pool = got.pool()  # what the served Retriever hands the pipeline
                assert pool.doc_ids == want.doc_ids and pool.missing_shards == ()
                assert [d.id for d in pool.documents] == want.doc_ids
                assert np.array_equal(pool.vectors, whole.vectors(want.doc_ids))
        finally:
            for store in stores:
                store.close()


def test_build_refuses_empty_shards_and_foreign_directories(tmp_path, embedder):
    docs = synthetic_documents(3)
    with pytest.raises(ValueError, match="empty"):
        build_sharded_index(tmp_path / "x", docs, embedder, shards=8)
    (tmp_path / "y").mkdir()
    (tmp_path / "y" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an empty directory"):
        build_sharded_index(tmp_path / "y", synthetic_documents(50), embedder, shards=2)
    manifest = build_sharded_index(tmp_path / "z", synthetic_documents(50), embedder, shards=2, bm25=None)
    assert manifest["shards"] == 2 and json.loads((tmp_path / "z" / "SHARDS.json").read_text())["count"] == 50
    with ShardedIndex.open(tmp_path / "z", embedder) as index:
        assert index.search("report 3", mode="dense", depth=5).doc_ids


def test_cli_build_shards_search_equals_unsharded(tmp_path, capsys):
    """``steadyrank index build --shards 3`` (bundled MiniLM), then info, search and delete on it;
    the dense and hybrid TREC runs equal the unsharded index's."""
    from steadyrank.metrics.io import read_trec_run
    from steadyrank.serve.cli.main import main
    from tests.retrieval.helpers import write_corpus

    corpus = write_corpus(tmp_path / "corpus.jsonl", synthetic_documents(45, seed=5))
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps({"_id": f"q{i}", "text": q}) + "\n" for i, q in enumerate(QUERIES)))
    for name, extra in (("flat", []), ("sharded", ["--shards", "3"])):
        assert main(["index", "build", "--corpus", str(corpus), "--out", str(tmp_path / name), *extra]) == 0
    capsys.readouterr()
    assert main(["index", "info", "--index", str(tmp_path / "sharded"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["live_count"] == 45 and len(info["shards"]) == 3 and info["assignment"] == "sha256-mod"
    for mode in ("dense", "hybrid"):
        runs = {}
        for name in ("flat", "sharded"):
            out = tmp_path / f"{name}-{mode}.trec"
            assert main(["search", "--index", str(tmp_path / name), "--queries", str(queries), "--run-out", str(out),
                         "--mode", mode, "--depth", "20"]) == 0
            runs[name] = read_trec_run(out)
        assert runs["sharded"] == runs["flat"], mode
    capsys.readouterr()
    assert main(["index", "delete", "--index", str(tmp_path / "sharded"), "--ids", "d0", "d1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["live_count"] == 43


def test_an_index_written_before_shard_sets_loads_and_an_overwrite_replaces_it(tmp_path, embedder):
    """The earlier layout (``dirs: ["shard-000", …]``, ``DIR/bm25-stats.json``) still loads, its
    one-shard readers accept its statistics, and an overwrite leaves only the new set."""
    path = tmp_path / "old"
    docs = synthetic_documents(60)
    build_sharded_index(path, docs, embedder, shards=2)
    manifest = read_shards_manifest(path)
    for name in manifest["dirs"]:
        (path / name).rename(path / name.split("/")[1])
    stats = json.loads((path / manifest["stats"]).read_text())
    stats["state"] = {name.split("/")[1]: state for name, state in stats["state"].items()}
    (path / "bm25-stats.json").write_text(json.dumps(stats))
    (path / manifest["set"]).joinpath("bm25-stats.json").unlink()
    (path / manifest["set"]).rmdir()
    legacy = {k: v for k, v in manifest.items() if k not in ("set", "stats")}
    (path / "SHARDS.json").write_text(json.dumps({**legacy, "dirs": ["shard-000", "shard-001"]}))
    with ShardedIndex.open(path, embedder) as index:
        assert index.count == 60 and index.search("report 3", mode="hybrid", depth=5).doc_ids
    open_shard(path, 1).close()
    build_sharded_index(path, synthetic_documents(40, prefix="n"), embedder, shards=3, overwrite=True)
    assert sorted(p.name for p in path.iterdir()) == ["LOCK", "SHARDS.json", "set-000001"]
    with ShardedIndex.open(path, embedder) as index:
        assert index.count == 40 and "n0" in index and "d0" not in index

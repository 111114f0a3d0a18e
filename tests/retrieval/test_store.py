"""The index store: round trips, verification on load, embedder refusal, WAL replay, compaction."""

from __future__ import annotations

import json

import numpy as np
import pytest

from steadyrank.retrieval.bm25 import Bm25Index, Bm25Settings
from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.dense import DenseIndex, DenseSettings
from steadyrank.retrieval.fsio import IndexLockedError
from steadyrank.retrieval.store import EmbedderMismatchError, IndexIntegrityError, IndexStore, build_index
from steadyrank.retrieval.wal import WalCorruptError
from tests.retrieval.helpers import HashEmbedder, synthetic_documents

QUERIES = ["the river protects winter storms", "volcano near the equator", "copper prices in small towns"]


def snapshot(store: IndexStore, depth: int = 20) -> dict:
    """Every mode's ids and scores for QUERIES (what must survive a round trip)."""
    out = {}
    for mode in ("dense", "bm25", "hybrid"):
        for q in QUERIES:
            c = store.search(q, mode=mode, depth=depth)
            out[(mode, q)] = (c.doc_ids, c.scores.tolist())
    return out


def test_flat_store_matches_definitions_and_survives_reload(tmp_path, embedder, documents):
    build_index(tmp_path / "idx", documents, embedder)
    position = {d.id: i for i, d in enumerate(documents)}
    vectors = embedder.encode([d.full_text for d in documents])
    bm25 = Bm25Index.build([d.full_text for d in documents], np.arange(len(documents)), Bm25Settings())
    with IndexStore.open(tmp_path / "idx", embedder) as store:
        first = snapshot(store)
        for q in QUERIES:
            cosine = vectors @ embedder.encode([q])[0]
            got = store.search(q, mode="dense", depth=20)
            # each score is that document's cosine, and they are the 20 largest cosines
            np.testing.assert_allclose(got.scores, cosine[[position[i] for i in got.doc_ids]], atol=1e-5)
            np.testing.assert_allclose(got.scores, np.sort(cosine)[::-1][:20], atol=1e-5)
            _, slots = bm25.search(q, 20)
            assert store.search(q, mode="bm25", depth=20).doc_ids == [documents[s].id for s in slots]
    with IndexStore.open(tmp_path / "idx", embedder) as again:
        assert snapshot(again) == first


def test_search_by_precomputed_vector_needs_no_embedder(tmp_path, embedder, documents):
    build_index(tmp_path / "idx", documents, embedder)
    with IndexStore.open(tmp_path / "idx", embedder) as encoding, IndexStore.open(tmp_path / "idx") as bare:
        for q in QUERIES:
            vector = embedder.encode([q])[0]
            for mode in ("dense", "hybrid"):
                want = encoding.search(q, mode=mode, depth=20)
                got = bare.search(q, mode=mode, depth=20, vector=vector)
                assert got.doc_ids == want.doc_ids and got.scores.tolist() == want.scores.tolist()
                assert "embed" not in got.timings
        with pytest.raises(ValueError, match="need the index's embedder"):
            bare.search(QUERIES[0], mode="dense")
        with pytest.raises(ValueError, match="query vector: .*expected"):
            bare.search(QUERIES[0], mode="dense", vector=np.ones(3, np.float32) / np.sqrt(3))
        with pytest.raises(ValueError, match="query vector: .*unit vectors"):
            bare.search(QUERIES[0], mode="dense", vector=2 * embedder.encode([QUERIES[0]])[0])


@pytest.mark.parametrize("factory", ["HNSW32,Flat", "IVF8,SQ8", "PCA32,IVF8,PQ8x4"])
def test_dense_index_write_read_round_trip_is_identical(tmp_path, embedder, factory):
    docs = synthetic_documents(800)
    vectors = embedder.encode([d.full_text for d in docs])
    index = DenseIndex.build(vectors, DenseSettings(factory, nprobe=4))
    index.delete([0, 5, 9])
    queries = embedder.encode(QUERIES)
    before = index.search(queries, 15)
    index.write(tmp_path / "dense.faiss")
    loaded = DenseIndex.read(tmp_path / "dense.faiss", DenseSettings(factory, nprobe=4))
    loaded.delete([0, 5, 9])
    after = loaded.search(queries, 15)
    np.testing.assert_array_equal(before[1], after[1])
    np.testing.assert_array_equal(before[0], after[0])
    assert not np.isin(after[1], [0, 5, 9]).any()


def test_bm25_save_load_round_trip_is_identical(tmp_path, documents):
    settings = Bm25Settings(stemmer="porter", stopwords=None, method="bm25+")
    index = Bm25Index.build([d.full_text for d in documents], np.arange(len(documents)), settings)
    index.save(tmp_path / "bm25")
    loaded = Bm25Index.load(tmp_path / "bm25", settings)
    for q in QUERIES:
        a, b = index.search(q, 30), loaded.search(q, 30)
        np.testing.assert_array_equal(a[1], b[1])
        np.testing.assert_array_equal(a[0], b[0])
        assert (a[0] > 0).all() and (np.diff(a[0]) <= 0).all()


def test_bm25_returns_only_matching_documents_with_deterministic_ties(documents):
    index = Bm25Index.build(["apple pie", "apple tart", "pear"], np.array([7, 3, 9]), Bm25Settings())
    scores, slots = index.search("apple zebra", 10)
    assert slots.tolist() == [3, 7] and scores[0] == scores[1]  # exact tie, ordered by slot
    assert index.search("zebra", 10)[1].size == 0


def test_hnsw_store_round_trip_identical(tmp_path, embedder, documents):
    build_index(tmp_path / "idx", documents, embedder, dense=DenseSettings("HNSW32,Flat", ef_search=64))
    with IndexStore.open(tmp_path / "idx", embedder) as a, IndexStore.open(tmp_path / "idx", embedder) as b:
        assert snapshot(a) == snapshot(b)
        assert a.info()["dense"]["factory"] == "HNSW32,Flat" and a.count == len(documents)


@pytest.mark.parametrize("victim", ["dense.faiss", "docs.jsonl", "embeddings.npy", "bm25/vocab.index.json"])
def test_checksum_mismatch_is_refused(tmp_path, embedder, documents, victim):
    build_index(tmp_path / "idx", documents, embedder)
    path = next((tmp_path / "idx").glob("gen-*")) / victim
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(IndexIntegrityError, match="checksum mismatch"):
        IndexStore.open(tmp_path / "idx", embedder)


def test_edited_manifest_is_refused(tmp_path, embedder, documents):
    build_index(tmp_path / "idx", documents, embedder)
    manifest = next((tmp_path / "idx").glob("gen-*")) / "manifest.json"
    data = json.loads(manifest.read_text())
    data["embedder"]["model_id"] = "someone/else"
    manifest.write_text(json.dumps(data))
    with pytest.raises(IndexIntegrityError, match="CURRENT"):
        IndexStore.open(tmp_path / "idx")


@pytest.mark.parametrize("other", [HashEmbedder(model_id="other/model"), HashEmbedder(dim=32)])
def test_wrong_embedder_is_refused(tmp_path, embedder, documents, other):
    build_index(tmp_path / "idx", documents, embedder)
    with pytest.raises(EmbedderMismatchError, match="test/hash-embedder-v1"):
        IndexStore.open(tmp_path / "idx", other)


def test_build_refuses_foreign_directory_and_needs_overwrite(tmp_path, embedder, documents):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("precious")
    with pytest.raises(ValueError, match="not a steadyrank index"):
        build_index(tmp_path / "mine", documents, embedder)
    build_index(tmp_path / "idx", documents, embedder)
    with pytest.raises(ValueError, match="overwrite"):
        build_index(tmp_path / "idx", documents[:10], embedder)
    build_index(tmp_path / "idx", documents[:10], embedder, overwrite=True)
    with IndexStore.open(tmp_path / "idx", embedder) as store:
        assert store.count == 10
    assert [p.name for p in (tmp_path / "idx").glob("gen-*")] == ["gen-000002"]


def test_duplicate_ids_and_empty_texts_are_refused(tmp_path, embedder):
    with pytest.raises(ValueError, match="'a'"):
        build_index(tmp_path / "idx", [Document("a", "x"), Document("a", "y")], embedder)
    with pytest.raises(ValueError, match="empty text"):
        build_index(tmp_path / "idx", [Document("a", "x"), Document("b", "  ")], embedder)


def test_add_delete_replay_and_compact(tmp_path, embedder, documents):
    build_index(tmp_path / "idx", documents[:300], embedder)
    with IndexStore.open(tmp_path / "idx", embedder, writable=True) as store:
        store.add(documents[300:])
        store.delete([documents[0].id, documents[350].id])
        with pytest.raises(ValueError, match="already in the index"):
            store.add([documents[1]])
        with pytest.raises(KeyError, match="nope"):
            store.delete(["nope", documents[2].id])
        assert documents[2].id in store  # refused delete deleted nothing
        live = snapshot(store)
        assert documents[0].id not in store and store.count == len(documents) - 2
    with IndexStore.open(tmp_path / "idx", embedder) as replayed:
        assert replayed.info()["wal_records"] == 2
        assert snapshot(replayed) == live
    # BM25 after mutations equals BM25 built from scratch over the live documents
    survivors = [d for d in documents if d.id not in (documents[0].id, documents[350].id)]
    build_index(tmp_path / "fresh", survivors, embedder)
    with IndexStore.open(tmp_path / "fresh", embedder) as fresh:
        for q in QUERIES:
            assert fresh.search(q, mode="bm25", depth=20).doc_ids == live[("bm25", q)][0]
            assert fresh.search(q, mode="dense", depth=20).scores.tolist() == pytest.approx(live[("dense", q)][1])
    with IndexStore.open(tmp_path / "idx", embedder, writable=True) as store:
        manifest = store.compact()
        assert manifest["count"] == len(survivors) and store.info()["wal_records"] == 0
        assert snapshot(store) == live
    assert [p.name for p in (tmp_path / "idx").glob("gen-*")] == ["gen-000002"]


def test_one_writer_at_a_time(tmp_path, embedder, documents):
    build_index(tmp_path / "idx", documents, embedder)
    with IndexStore.open(tmp_path / "idx", embedder, writable=True):
        with pytest.raises(IndexLockedError, match="locked for writing"):
            IndexStore.open(tmp_path / "idx", embedder, writable=True)
        IndexStore.open(tmp_path / "idx", embedder).close()  # readers are welcome
    IndexStore.open(tmp_path / "idx", embedder, writable=True).close()


def test_read_only_store_refuses_mutation(tmp_path, embedder, documents):
    build_index(tmp_path / "idx", documents, embedder)
    with IndexStore.open(tmp_path / "idx", embedder) as store, pytest.raises(ValueError, match="read-only"):
        store.delete([documents[0].id])


def test_torn_wal_tail_is_ignored_and_corruption_refused(tmp_path, embedder, documents):
    build_index(tmp_path / "idx", documents[:200], embedder)
    with IndexStore.open(tmp_path / "idx", embedder, writable=True) as store:
        store.add(documents[200:210])
        store.delete([documents[0].id])
    wal = next((tmp_path / "idx").glob("gen-*")) / "wal.jsonl"
    intact = wal.read_bytes()
    wal.write_bytes(intact + b'{"seq": 3, "op": "delete", "ids": ["d1"')  # a write cut by a crash
    with IndexStore.open(tmp_path / "idx", embedder, writable=True) as store:
        assert documents[1].id in store and store.count == 209
        store.delete([documents[2].id])  # appended after the truncated tail
    with IndexStore.open(tmp_path / "idx", embedder) as store:
        assert store.info()["wal_records"] == 3 and documents[2].id not in store
    lines = wal.read_bytes().splitlines(keepends=True)
    wal.write_bytes(lines[0].replace(b'"op":"add"', b'"op":"del"') + b"".join(lines[1:]))
    with pytest.raises(WalCorruptError, match="record 1"):
        IndexStore.open(tmp_path / "idx", embedder)


def test_non_normalised_embedder_is_refused(tmp_path, documents):
    class Raw(HashEmbedder):
        def encode(self, texts, *, prompt="", show_progress=False):
            return super().encode(texts, prompt=prompt) * 2.0

    with pytest.raises(ValueError, match="unit vectors"):
        build_index(tmp_path / "idx", documents, Raw())
    assert not (tmp_path / "idx" / "CURRENT").exists()


def test_ivf_needs_enough_training_vectors(tmp_path, embedder, documents):
    with pytest.raises(ValueError, match="needs at least 1024 vectors"):
        build_index(tmp_path / "idx", documents, embedder, dense=DenseSettings("IVF1024,SQ8"))


def test_a_reader_racing_a_compaction_retries_when_faiss_finds_its_file_gone(tmp_path, embedder, documents, monkeypatch):
    """The race made deterministic: between the reader's reading ``CURRENT`` and FAISS's reading
    ``dense.faiss``, a writer compacts (the old generation is deleted); FAISS then raises
    RuntimeError (not FileNotFoundError) and the reader loads the new generation instead."""
    from steadyrank.retrieval import store as store_module

    path = tmp_path / "idx"
    build_index(path, documents, embedder)
    writer = IndexStore.open(path, embedder, writable=True)
    writer.delete([documents[0].id])
    real_read = store_module.DenseIndex.read
    raised: list[str] = []
    compacted: list[bool] = []

    def read_after_a_compaction(file, settings):
        if compacted:
            return real_read(file, settings)
        compacted.append(True)
        writer.compact()  # (its own load of the new generation reads through here too)
        try:
            return real_read(file, settings)
        except RuntimeError as exc:
            raised.append(str(exc))
            raise

    monkeypatch.setattr(store_module.DenseIndex, "read", staticmethod(read_after_a_compaction))
    with IndexStore.open(path, embedder) as reader:
        assert raised and reader.generation == "gen-000002" and documents[0].id not in reader
    writer.close()

"""Shard sizing benchmark: FAISS factories at N random 384-d unit vectors, and scatter-gather cost.

Per factory (Flat, HNSW32,Flat, IVF<nlist>,SQ8, IVF<nlist>,PQ32; ``nlist`` = 4·√N rounded to a power
of two, ``nprobe`` 16, ``efSearch`` 128, ``efConstruction`` from ``--ef-construction``) through
``retrieval.dense.DenseIndex`` (the serving code): build seconds (train + add), bytes per document
(the serialised FAISS index / N — what a shard holds in RAM for vectors; ``embeddings.npy`` adds
4·dim bytes per document on disk, memory-mapped), single-query latency and QPS at k=100 (queries
one by one, as the Retriever serves them), and recall@10 against Flat.

Scatter-gather: the Flat index split into S ∈ {1, 2, 4} shards by ``shard_of``; each query goes to
every shard through :func:`steadyrank.retrieval.shards.scatter_gather` (one thread per shard call,
as a Serve replica runs FAISS off its event loop) and is merged exactly; reported beside the
unsharded search of the same queries, with the merge alone timed separately. The merged ids are
checked to equal the unsharded ones.

    python benchmarks/bench_shards.py [--n 1000000] [--queries 200] [--factories Flat HNSW32,Flat …] [--out F.json]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.dense import DenseIndex, DenseSettings
from steadyrank.retrieval.shards import ShardAnswer, ShardHits, merge_hits, scatter_gather, shard_of

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import emit, write_json  # noqa: E402

DIM = 384
K = 100
PLACEHOLDER = Document("d", "a shard returns the documents it names; one shared object stands for them here")


def unit_vectors(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIM), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def nlist_for(n: int) -> int:
    return int(2 ** round(np.log2(4 * np.sqrt(n))))


def per_query(index: DenseIndex, queries: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean seconds per single-query search, and the top-K slots (q, K)."""
    out = np.empty((len(queries), K), dtype=np.int64)
    started = time.perf_counter()
    for i in range(len(queries)):
        out[i] = index.search(queries[i : i + 1], K)[1][0]
    return (time.perf_counter() - started) / len(queries), out


def bench_factory(factory: str, vectors: np.ndarray, queries: np.ndarray, truth: np.ndarray | None,
                  ef_construction: int) -> dict[str, Any]:
    settings = DenseSettings(factory=factory, ef_construction=ef_construction)
    started = time.perf_counter()
    index = DenseIndex.build(vectors, settings)
    build_s = time.perf_counter() - started
    size = faiss.serialize_index(index.index).nbytes
    latency, found = per_query(index, queries)
    recall = None
    if truth is not None:
        recall = float(np.mean([len(set(a[:10]) & set(b[:10])) / 10 for a, b in zip(found, truth, strict=True)]))
    return {"factory": factory, "build_s": build_s, "bytes_per_doc": size / len(vectors), "latency_ms": 1000 * latency,
            "qps": 1 / latency, "recall_at_10": recall, "found": found}


def bench_scatter(vectors: np.ndarray, queries: np.ndarray, truth: np.ndarray, shards: int) -> dict[str, Any]:
    ids = [f"d{i}" for i in range(len(vectors))]
    owner = np.array([shard_of(i, shards) for i in ids])
    parts = []
    for s in range(shards):
        rows = np.flatnonzero(owner == s)
        parts.append((rows, DenseIndex.build(vectors[rows], DenseSettings("Flat"))))

    def answer(part: tuple[np.ndarray, DenseIndex], query: np.ndarray) -> ShardAnswer:
        rows, index = part
        scores, slots = index.search(query, K)
        seqs = rows[slots[0]].tolist()
        hit_ids = [ids[q] for q in seqs]
        return ShardAnswer(ShardHits(hit_ids, scores[0], seqs), None, {i: PLACEHOLDER for i in hit_ids})

    async def run() -> tuple[float, float, list[list[int]]]:
        merged, merge_s = [], 0.0
        started = time.perf_counter()
        for i in range(len(queries)):
            query = queries[i : i + 1]
            calls = [lambda p=p, q=query: asyncio.to_thread(answer, p, q) for p in parts]
            gathered = await scatter_gather(calls, mode="dense", depth=K, timeout_s=60)
            merged.append([int(d[1:]) for d in gathered.candidates.doc_ids])
        total = (time.perf_counter() - started) / len(queries)
        answers = [answer(p, queries[:1]) for p in parts]
        t = time.perf_counter()
        for _ in range(200):
            merge_hits([a.dense for a in answers], K)
        merge_s = (time.perf_counter() - t) / 200
        return total, merge_s, merged

    total, merge_s, merged = asyncio.run(run())
    exact = all(m == t.tolist() for m, t in zip(merged, truth, strict=True))
    return {"shards": shards, "latency_ms": 1000 * total, "merge_ms": 1000 * merge_s, "equals_unsharded": exact}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="vectors (default %(default)s)")
    parser.add_argument("--queries", type=int, default=200, help="single-query searches per index (default %(default)s)")
    parser.add_argument("--factories", nargs="+", default=None,
                        help="factory strings (default Flat, HNSW32,Flat, IVF<nlist>,SQ8, IVF<nlist>,PQ32)")
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4], help="shard counts (default 1 2 4)")
    parser.add_argument("--ef-construction", type=int, default=DenseSettings.ef_construction,
                        help="HNSW build breadth (default %(default)s, the index default; FAISS's own is 40)")
    parser.add_argument("--threads", type=int, default=None, help="FAISS OpenMP threads (default: FAISS's)")
    parser.add_argument("--out", help="also write the JSON here")
    parser.add_argument("--json", action="store_true", help="JSON on stdout, table on stderr")
    args = parser.parse_args(argv)
    if args.threads:
        faiss.omp_set_num_threads(args.threads)
    load_start = os.getloadavg()
    nlist = nlist_for(args.n)
    factories = args.factories or ["Flat", "HNSW32,Flat", f"IVF{nlist},SQ8", f"IVF{nlist},PQ32"]
    vectors, queries = unit_vectors(args.n, 0), unit_vectors(args.queries, 1)
    results, truth = [], None
    for factory in factories:
        print(f"building {factory} over {args.n} vectors…", file=sys.stderr, flush=True)
        result = bench_factory(factory, vectors, queries, truth, args.ef_construction)
        if factory == "Flat":
            truth = result["found"]
        results.append({k: v for k, v in result.items() if k != "found"})
    if truth is None:
        flat_ms, truth = per_query(DenseIndex.build(vectors, DenseSettings("Flat")), queries)
        flat_ms *= 1000
    else:
        flat_ms = next(r["latency_ms"] for r in results if r["factory"] == "Flat")
    scatter = [bench_scatter(vectors, queries, truth, s) for s in args.shards]
    for row in scatter:
        row["vs_unsharded_flat"] = row["latency_ms"] / flat_ms
    payload = {
        "n": args.n, "dim": DIM, "k": K, "queries": args.queries, "nlist": nlist, "ef_construction": args.ef_construction,
        "faiss_threads": faiss.omp_get_max_threads(), "load_average_start": load_start, "load_average": os.getloadavg(),
        "factories": results, "scatter_gather": scatter,
    }
    if args.out:
        payload = write_json(args.out, payload)
    rows = [[r["factory"], r["build_s"], r["bytes_per_doc"], r["latency_ms"], r["qps"],
             "—" if r["recall_at_10"] is None else r["recall_at_10"]] for r in results]
    rows += [[f"Flat ×{s['shards']} shards (scatter-gather)", "", "", s["latency_ms"], 1000 / s["latency_ms"],
              f"×{s['vs_unsharded_flat']:.2f} of unsharded Flat; merge {s['merge_ms']:.3f} ms, "
              f"exact={s['equals_unsharded']}"] for s in scatter]
    emit(payload, ["index", "build s", "bytes/doc", "ms/query", "QPS", "recall@10 vs Flat"], rows, json_only=args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Retrieval benchmark: dense / BM25 / hybrid × fixed-50 / fixed-100 / dynamic-K, and Flat vs HNSW.

Data: a BEIR folder given as ``--data`` (read in place, never copied; docs/data.md says where to get one).
Grades map to the 1–5 rubric as 3→5, 2→4, 1→3, unjudged→1 for the set metrics; nDCG@10 uses the
TREC DL gains 0–3. Every judged query is retrieved to depth 100 and reranked in two timed passes
(first 50, then 51–100); fixed-50, fixed-100 and dynamic are replays of those passes (exact for a
pointwise reranker), so every route sees identical scores and the latencies are the measured passes.

Dynamic thresholds are calibrated (objective: gain per extra candidate, ≥ 90 % of fixed-100's
RA-nWG@30 gain) with k-fold cross-validation over queries: each query is routed by thresholds fitted
on the other folds; ``dynamic-model`` is the logistic routing model (``route calibrate --model``),
cross-validated the same way, escalating at most 30 % of the training queries (65 % of fixed-100's
candidates); ``dynamic-boundary ≤r`` is the same model on ``boundary_gap`` alone (one threshold on the
head-vs-cut reranker score gap), cross-validated with at most ``r`` of the training queries escalated,
for r in 20 %, 25 %, 30 % (its cross-validated recovery curve).
The recovery curves (gain recovered vs candidates reranked) of the oracle (queries
escalated in order of their true gain: the best any per-query choice of K can do) and of the
model's out-of-fold probabilities are reported per mode. ``dynamic-insample`` (fitted on all queries) and ``dynamic-default`` (built-in
thresholds) are reported beside it.

Embeddings of the corpus are cached under ``.steadyrank-cache/`` (git-ignored), keyed by the corpus
bytes and the embedder id; rerank passes are recomputed on every run unless ``--reuse-rankings``.

    python benchmarks/bench_retrieval.py [--data DIR] [--rerank PATH|bundled] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import faiss
import numpy as np
from _report import with_provenance, write_json  # benchmarks/ is on sys.path when run as a script
from tqdm import tqdm

from steadyrank.metrics import evaluate
from steadyrank.metrics.io import read_beir
from steadyrank.retrieval.calibration import (
    best_recovery_within,
    calibrate,
    fit_model,
    observe,
    recovery_curve,
    replay_route,
)
from steadyrank.retrieval.corpus import read_documents
from steadyrank.retrieval.dense import DenseIndex, DenseSettings
from steadyrank.retrieval.fusion import DEFAULT_RRF_K
from steadyrank.retrieval.pipeline import Ranked, latency_summary, local_models, rerank_candidates, search
from steadyrank.retrieval.routing import RoutingSettings, model_probability
from steadyrank.retrieval.store import MODES, IndexStore, build_index
from steadyrank.serve.output import dumps_json, format_table
from steadyrank.serve.tools.clq.builds import CachedEmbedder, cached_corpus_vectors

REPO = Path(__file__).resolve().parents[1]
RUBRIC = {3: 5, 2: 4, 1: 3, 0: 1}
MEASURES = ["ndcg@10", "ra_nwg@10", "ra_nwg@30", "nrecall4@10", "nrecall4@30"]
GAIN_MEASURE = "ra_nwg@30"
RETRIEVAL_STAGES = ("embed", "dense", "bm25", "fuse")
FACTORIES = ("Flat", "HNSW32,Flat", "IVF64,SQ8")
MAX_SHARE = 0.65  # target: ≥ 90 % of fixed-100's gain at ≤ 65 % of its candidates
TARGET_RATE = 0.30  # routing model: escalate ≤ 30 % of queries → 50 + 0.3 · 50 = 65 candidates
BOUNDARY_RATES = (0.20, 0.25, TARGET_RATE)  # boundary_gap alone: escalation caps of its CV recovery curve


def rerank_all(store: IndexStore, queries: dict[str, str], reranker: Any, base: RoutingSettings,
               modes: list[str], embedder: Any = None) -> dict[str, dict[str, Ranked]]:
    """Every mode × query, retrieved to k_high and reranked in two passes (route fixed100).

    With ``embedder`` (the reranker is that embedder) the passes score from the index's stored
    vectors, the server's path for an embedder-as-reranker (``retrieval.pipeline.search`` with
    ``stored_vectors``): the FP32 cosine the model would give, without re-embedding documents.
    """
    models = None if embedder is None else local_models(store, embedder, reranker, rrf_k=DEFAULT_RRF_K,
                                                        rrf_weights=(1.0, 1.0), stored_vectors=True)
    out: dict[str, dict[str, Ranked]] = {}
    for mode in modes:
        out[mode] = {}
        for qid, text in tqdm(queries.items(), desc=f"{mode}: retrieve + rerank", unit="query", file=sys.stderr):
            if models is not None:
                out[mode][qid] = asyncio.run(search(text, mode, models, base, "fixed100"))  # type: ignore[arg-type]
                continue
            candidates = store.search(text, mode=mode, depth=base.k_high)
            out[mode][qid] = rerank_candidates(store, text, candidates, reranker, base, "fixed100")
    return out


def cross_validated_settings(
    rankings: dict[str, Ranked], qrels: dict, base: RoutingSettings, folds: int, fitter: Any = calibrate,
    **options: Any,
) -> dict[str, RoutingSettings]:
    """Per query: settings fitted (``fitter``: thresholds or the routing model) on the queries of the
    other folds (round-robin over sorted ids)."""
    observations = observe(rankings, qrels, base, measure=GAIN_MEASURE, rubric_map=RUBRIC)
    qids = sorted(o.qid for o in observations)
    fold_of = {qid: i % folds for i, qid in enumerate(qids)}
    per_query = {}
    for fold in range(folds):
        train = [o for o in observations if fold_of[o.qid] != fold]
        settings = fitter(train, base, measure=GAIN_MEASURE, **options).settings
        per_query.update({qid: settings for qid in qids if fold_of[qid] == fold})
    return per_query


def recovery(rankings: dict[str, Ranked], qrels: dict, base: RoutingSettings, model_cv: dict[str, RoutingSettings],
             max_share: float) -> dict[str, Any]:
    """Recovery curves (gain recovered vs candidates reranked): the oracle (queries escalated in order
    of their true gain) and the routing model's out-of-fold probabilities; best recovery within
    ``max_share`` of fixed-100's candidates on each."""
    observations = observe(rankings, qrels, base, measure=GAIN_MEASURE, rubric_map=RUBRIC)
    oracle = recovery_curve(observations, [o.gain for o in observations], base.k_low)
    model = recovery_curve(observations, [model_probability(o.signals, model_cv[o.qid]) for o in observations],
                           base.k_low)
    return {"oracle": oracle, "model_cv": model,
            "oracle_best_within": best_recovery_within(oracle, max_share),
            "model_cv_best_within": best_recovery_within(model, max_share),
            "oracle_max": max(p["recovered"] for p in oracle)}


def route_row(rankings: dict[str, Ranked], qrels: dict, settings_of: dict[str, RoutingSettings], route: str) -> dict[str, Any]:
    """Metrics, candidates reranked, escalation rate and latencies of one route over all queries."""
    run, reranked, escalated, stage_seconds = {}, [], [], []
    for qid, ranked in rankings.items():
        doc_ids, scores, decision = replay_route(ranked, settings_of[qid], route)  # type: ignore[arg-type]
        run[qid] = dict(zip(doc_ids, map(float, scores), strict=True))
        reranked.append(decision.k_rerank)
        escalated.append(decision.escalated)
        retrieval = sum({**ranked.candidates.timings, **ranked.timings}.get(s, 0.0) for s in RETRIEVAL_STAGES)
        rerank = ranked.timings["rerank"] if decision.escalated else ranked.first_pass_s
        stage_seconds.append({"retrieval": retrieval, "rerank": rerank, "total": retrieval + rerank})
    summary = evaluate(run, qrels, MEASURES, rubric_map=RUBRIC).summary
    return {
        "metrics": {m: summary[m]["expected"] for m in MEASURES},
        "tie_range": {m: summary[m]["range"] for m in MEASURES},
        "proc": {m: summary[m]["proc"] for m in MEASURES},
        "proc_ratio": {m: summary[m]["proc_ratio"] for m in MEASURES},
        "n_queries": summary[GAIN_MEASURE]["n_valid"],
        "mean_reranked": float(np.mean(reranked)),
        "escalation_rate": float(np.mean(escalated)),
        "latency": latency_summary(stage_seconds),
    }


def dense_indexes(vectors: np.ndarray, queries: np.ndarray, k: int = 10) -> list[dict[str, Any]]:
    """Build time, single-query and batch QPS, recall@10 against Flat, for each factory."""
    rows, exact = [], None
    for factory in FACTORIES:
        started = time.perf_counter()
        index = DenseIndex.build(vectors, DenseSettings(factory))
        build = time.perf_counter() - started
        _, top = index.search(queries, k)
        exact = top if exact is None else exact
        repeats = max(1, 2000 // len(queries))
        started = time.perf_counter()
        for _ in range(repeats):
            for row in queries:
                index.search(row[None, :], k)
        single = repeats * len(queries) / (time.perf_counter() - started)
        started = time.perf_counter()
        for _ in range(repeats):
            index.search(queries, k)
        batch = repeats * len(queries) / (time.perf_counter() - started)
        recall = float(np.mean([len(set(a) & set(e)) / k for a, e in zip(top, exact, strict=False)]))
        rows.append({"factory": factory, "build_s": build, "qps_single": single, "qps_batch": batch, "recall@10": recall})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv); "
                        "docs/data.md says where to get TREC-DL and BEIR data")
    parser.add_argument("--rerank", default=None, help="reranker model directory (default: bundled MiniLM, FP32 HPS)")
    parser.add_argument("--rerank-precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    parser.add_argument("--embedder", default=None, help="bi-encoder directory (default: bundled MiniLM)")
    parser.add_argument("--modes", default=",".join(MODES), help="first stages, comma-separated (default %(default)s)")
    parser.add_argument("--folds", type=int, default=5, help="cross-validation folds for dynamic thresholds")
    parser.add_argument("--cache", type=Path, default=REPO / ".steadyrank-cache" / "bench-retrieval",
                        help="embedding cache folder; shares vectors with `steadyrank clq sweep --cache` (default %(default)s)")
    parser.add_argument("--stored-vectors", action="store_true",
                        help="the reranker is the embedder (bundled MiniLM, FP32 HPS): score from the index's stored "
                             "vectors as the server does, instead of re-embedding every candidate")
    parser.add_argument("--reuse-rankings", action="store_true",
                        help="reuse the rerank passes of the previous run with the same inputs (latencies included)")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args(argv)

    from steadyrank.serve.runtime import ModelSettings, load_embedder, load_scorer

    beir = read_beir(args.data)
    documents = read_documents(args.data)
    queries = {q: t for q, t in beir.queries.items() if q in beir.qrels}
    embedder = load_embedder(ModelSettings(path=args.embedder))
    reranker = load_scorer(ModelSettings(path=args.rerank, precision=args.rerank_precision))
    base = RoutingSettings()
    vectors, _ = cached_corpus_vectors(documents, embedder, args.cache)

    modes = [m for m in args.modes.split(",") if m]
    if not modes or set(modes) - set(MODES):
        parser.error(f"--modes: choose among {', '.join(MODES)}")
    if args.stored_vectors and (args.rerank not in (None, "bundled", args.embedder) or args.rerank_precision != "fp32"):
        parser.error("--stored-vectors: the reranker must be the embedder (no --rerank, FP32)")
    key = hashlib.sha256(json.dumps([str(args.data), embedder.model_id, reranker.model_id, args.rerank_precision,
                                     base.to_json(), modes, args.stored_vectors]).encode()).hexdigest()[:16]
    rankings_path = args.cache / f"rankings-{key}.pkl"
    with tempfile.TemporaryDirectory() as tmp:
        build_index(Path(tmp) / "flat", documents, CachedEmbedder(embedder, [d.full_text for d in documents], vectors))
        with IndexStore.open(Path(tmp) / "flat", embedder) as store:
            if args.reuse_rankings and rankings_path.exists():
                rankings = pickle.loads(rankings_path.read_bytes())
            else:
                rankings = rerank_all(store, queries, reranker, base, modes, embedder if args.stored_vectors else None)
                rankings_path.write_bytes(pickle.dumps(rankings))

    results: dict[str, Any] = {"modes": {}, "targets": {}}
    for mode in modes:
        cv = cross_validated_settings(rankings[mode], beir.qrels, base, args.folds)
        model_cv = cross_validated_settings(rankings[mode], beir.qrels, base, args.folds, fit_model,
                                            objective="rate", target_rate=TARGET_RATE)
        boundary_cv = {rate: cross_validated_settings(rankings[mode], beir.qrels, base, args.folds, fit_model,
                                                      objective="rate", target_rate=rate, features=("boundary_gap",))
                       for rate in BOUNDARY_RATES}
        fitted = calibrate(observe(rankings[mode], beir.qrels, base, measure=GAIN_MEASURE, rubric_map=RUBRIC), base)
        routes = {
            "fixed-50": ("fixed50", dict.fromkeys(queries, base)),
            "fixed-100": ("fixed100", dict.fromkeys(queries, base)),
            "dynamic": ("dynamic", cv),
            "dynamic-model": ("dynamic", model_cv),
            "dynamic-insample": ("dynamic", dict.fromkeys(queries, fitted.settings)),
            "dynamic-default": ("dynamic", dict.fromkeys(queries, base)),
            **{f"dynamic-boundary ≤{rate:.0%}": ("dynamic", settings) for rate, settings in boundary_cv.items()},
        }
        rows = {name: route_row(rankings[mode], beir.qrels, settings, route) for name, (route, settings) in routes.items()}
        results["modes"][mode] = {
            "routes": rows,
            "stage_latency": latency_summary([{**r.candidates.timings, **r.timings} for r in rankings[mode].values()]),
            "insample_settings": fitted.settings.to_json(),
            "recovery": recovery(rankings[mode], beir.qrels, base, model_cv, MAX_SHARE),
        }
        low, high = rows["fixed-50"], rows["fixed-100"]
        gain = high["metrics"][GAIN_MEASURE] - low["metrics"][GAIN_MEASURE]
        for name in (n for n in rows if n.startswith("dynamic")):
            row = rows[name]
            recovered = (row["metrics"][GAIN_MEASURE] - low["metrics"][GAIN_MEASURE]) / gain if gain > 0 else None
            share = row["mean_reranked"] / high["mean_reranked"]
            results["targets"][f"{mode}/{name}"] = {
                "fixed100_gain": gain,
                "recovered": recovered,
                "candidates_vs_fixed100": share,
                "meets_target": recovered is not None and recovered >= 0.9 and share <= MAX_SHARE,
            }

    query_vectors = embedder.encode(list(queries.values()))
    results["dense_indexes"] = dense_indexes(vectors, query_vectors)
    results["setup"] = {
        "data": str(args.data), "queries": len(queries), "documents": len(documents), "embedder": embedder.model_id,
        "reranker": reranker.model_id, "rerank_precision": args.rerank_precision, "k_low": base.k_low,
        "k_high": base.k_high, "folds": args.folds, "stored_vectors": args.stored_vectors,
        "load_average": list(os.getloadavg()), "faiss_threads": faiss.omp_get_max_threads(),
        "rubric_map": {str(k): v for k, v in RUBRIC.items()},
    }

    print_tables(results)
    results = with_provenance(results)
    print(dumps_json(results))
    if args.out:
        write_json(args.out, results)
    return 0


def print_tables(results: dict[str, Any]) -> None:
    headers = ["mode / route", "nDCG@10", "RA-nWG@10", "RA-nWG@30", "NR4+@10", "NR4+@30", "PROC@30", "%PROC@30",
               "reranked", "escal.", "rerank p50 ms", "rerank p95 ms", "total p50 ms", "total p95 ms"]
    rows = []
    for mode, block in results["modes"].items():
        for name, r in block["routes"].items():
            m, lat = r["metrics"], r["latency"]
            rows.append([
                f"{mode} / {name}", m["ndcg@10"], m["ra_nwg@10"], m["ra_nwg@30"], m["nrecall4@10"], m["nrecall4@30"],
                r["proc"][GAIN_MEASURE], r["proc_ratio"][GAIN_MEASURE], f"{r['mean_reranked']:.1f}",
                f"{r['escalation_rate']:.0%}", f"{lat['rerank']['p50_ms']:.0f}", f"{lat['rerank']['p95_ms']:.0f}",
                f"{lat['total']['p50_ms']:.0f}", f"{lat['total']['p95_ms']:.0f}",
            ])
    print(format_table(headers, rows))
    print()
    stages = ["embed", "dense", "bm25", "fuse", "route", "rerank"]
    print(format_table(
        ["stage p50 / p95 ms", *stages],
        [[mode, *(f"{lat[s]['p50_ms']:.1f} / {lat[s]['p95_ms']:.1f}" if s in lat else "-" for s in stages)]
         for mode, lat in ((m, b["stage_latency"]) for m, b in results["modes"].items())],
    ))
    print()
    print(format_table(
        ["target (dynamic vs fixed)", "fixed-100 gain", "recovered", "candidates / fixed-100", "met"],
        [[k, v["fixed100_gain"], v["recovered"], v["candidates_vs_fixed100"], str(v["meets_target"])]
         for k, v in results["targets"].items()],
    ))
    print()
    print(format_table(
        ["recovery (gain recovered)", f"oracle ≤ {MAX_SHARE:.0%} candidates", "oracle max",
         f"model (CV) ≤ {MAX_SHARE:.0%} candidates"],
        [[mode, b["recovery"]["oracle_best_within"], b["recovery"]["oracle_max"], b["recovery"]["model_cv_best_within"]]
         for mode, b in results["modes"].items()],
    ))
    print()
    print(format_table(
        ["factory", "build s", "QPS (1 query)", "QPS (batch)", "recall@10 vs Flat"],
        [[r["factory"], r["build_s"], f"{r['qps_single']:.0f}", f"{r['qps_batch']:.0f}", r["recall@10"]]
         for r in results["dense_indexes"]],
    ))
    print()


if __name__ == "__main__":
    sys.exit(main())

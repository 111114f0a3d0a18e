"""Tie-aware metrics against pytrec_eval, ranx and the TRM reference package, in one run.

Data: Q queries × L candidates, scores drawn from a normal distribution (relevant items shifted
up) and rounded to BF16 (stored as float32), so that ties are common; ~3 relevant items per query
with grades 1–3. steadyrank computes the full tie-aware pass (expected, min, max, oblivious and
PROC) of ndcg@10, mrr@10, map@10, recall@10; pytrec_eval and ranx compute the same four
tie-oblivious values; the TRM reference runs on the first ``--reference-queries`` queries and is
scaled to Q. Peak memory is the tracemalloc peak during steadyrank's array pass over the size of
its input arrays. The floor is one numpy ``argpartition`` of the score matrix at the largest cutoff
(the least any top-K evaluation must do); it and steadyrank's array pass run interleaved
``--rounds`` times in the same process, and the medians and their ratio are reported (the box is
shared: a ratio within one process is what compares; the CPU flags and numpy version that decide
which SIMD kernels run are recorded). Run:
``python benchmarks/bench_metrics.py [--queries 10000 --candidates 1000] [--rounds 15]``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc

import numpy as np
from _report import emit, timed, write_json  # benchmarks/ is on sys.path when run as a script

from steadyrank.metrics import evaluate, evaluate_arrays
from steadyrank.serve.runtime.precision import cpu_flags

MEASURES = ["ndcg@10", "mrr@10", "map@10", "recall@10"]


def round_to_bf16(values: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest BF16 (round half to even), returned as float32."""
    bits = values.astype(np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    return ((bits + rounding) & np.uint32(0xFFFF0000)).view(np.float32)


def make_data(n_queries: int, n_candidates: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    grades = np.zeros((n_queries, n_candidates), dtype=np.int8)
    n_relevant = rng.integers(1, 6, size=n_queries)  # mean 3
    for q in range(n_queries):
        grades[q, rng.choice(n_candidates, size=n_relevant[q], replace=False)] = rng.integers(1, 4, size=n_relevant[q])
    logits = rng.normal(size=(n_queries, n_candidates)).astype(np.float32) + 1.5 * (grades > 0)
    scores = round_to_bf16(1 / (1 + np.exp(-logits)))  # a BF16 sigmoid: ties in the saturated tail
    judged = np.full((n_queries, 5), np.nan)
    for q in range(n_queries):
        pool = grades[q][grades[q] > 0]
        judged[q, : pool.size] = pool
    return scores, grades, judged


def as_dicts(scores, grades, n_queries):
    run, qrels = {}, {}
    for q in range(n_queries):
        docs = [f"d{j}" for j in range(scores.shape[1])]
        run[f"q{q}"] = dict(zip(docs, scores[q].astype(np.float64).tolist(), strict=True))
        qrels[f"q{q}"] = {docs[j]: int(grades[q, j]) for j in np.flatnonzero(grades[q])}
    return run, qrels


def floor_and_engine(scores, grades, judged, rounds: int) -> dict:
    """The argpartition floor and the array pass, interleaved ``rounds`` times: medians and ratio (seconds)."""
    kmax = max(int(m.split("@")[1]) for m in MEASURES)
    width = scores.shape[1]
    floor, engine = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        np.argpartition(scores, width - kmax, axis=1)
        floor.append(time.perf_counter() - start)
        start = time.perf_counter()
        evaluate_arrays(scores, grades, judged, MEASURES)
        engine.append(time.perf_counter() - start)
    f, e = statistics.median(floor), statistics.median(engine)
    return {"rounds": rounds, "floor_median_s": f, "engine_median_s": e, "engine_over_floor": e / f,
            "engine_over_floor_per_round_median": statistics.median(b / a for a, b in zip(floor, engine, strict=True))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--candidates", type=int, default=1_000)
    parser.add_argument("--reference-queries", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=15, help="interleaved floor/engine rounds (medians)")
    parser.add_argument("--out", default=None, help="also write the JSON (with its provenance) here")
    parser.add_argument("--json", action="store_true", help="table to stderr, only JSON on stdout")
    args = parser.parse_args()

    scores, grades, judged = make_data(args.queries, args.candidates)
    input_bytes = scores.nbytes + grades.nbytes + judged.nbytes
    ties = np.mean([np.unique(row).size for row in scores[:200]]) / args.candidates

    gc.collect()
    tracemalloc.start()
    arrays_s, result = timed(lambda: evaluate_arrays(scores, grades, judged, MEASURES))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    arrays_s, result = timed(lambda: evaluate_arrays(scores, grades, judged, MEASURES), repeat=2)
    floor = floor_and_engine(scores, grades, judged, args.rounds)

    run, qrels = as_dicts(scores, grades, args.queries)
    dicts_s, by_dict = timed(lambda: evaluate(run, qrels, MEASURES))

    import pytrec_eval

    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recip_rank", "map_cut.10", "recall.10"})
    pytrec_s, _ = timed(lambda: evaluator.evaluate(run))

    from ranx import Qrels, Run
    from ranx import evaluate as ranx_evaluate

    ranx_qrels, ranx_run = Qrels(qrels), Run(run)
    warm_q, warm_r = Qrels({k: qrels[k] for k in list(qrels)[:5]}), Run({k: run[k] for k in list(run)[:5]})
    ranx_evaluate(warm_q, warm_r, MEASURES)  # JIT warm-up
    ranx_s, _ = timed(lambda: ranx_evaluate(ranx_qrels, ranx_run, MEASURES))

    import trm

    n_ref = min(args.reference_queries, args.queries)
    ref_scores = [row.astype(np.float64).tolist() for row in scores[:n_ref]]
    ref_relevant = [(row > 0).tolist() for row in grades[:n_ref]]
    ref_s, reference = timed(
        lambda: trm.evaluate(ref_scores, ref_relevant, metrics=["ndcg", "mrr", "map", "recall"], k_list=[10])
    )
    ref_scaled = ref_s * args.queries / n_ref
    binary = (grades[:n_ref] > 0).astype(np.int8)
    ours_on_ref = evaluate_arrays(scores[:n_ref], binary, np.where(binary > 0, 1.0, np.nan), MEASURES)
    agreement = max(
        abs(np.nanmean(ours_on_ref[f"{name}@10"].expected) - reference.metrics[name][10].expected)
        for name in ("ndcg", "mrr", "map", "recall")
    )

    payload = {
        "queries": args.queries, "candidates": args.candidates, "unique_score_fraction": ties,
        "seconds": {"steadyrank_arrays": arrays_s, "steadyrank_dicts": dicts_s, "pytrec_eval": pytrec_s,
                    "ranx": ranx_s, "trm_reference_scaled": ref_scaled},
        "ratios": {"steadyrank_arrays/pytrec_eval": arrays_s / pytrec_s, "steadyrank_arrays/ranx": arrays_s / ranx_s,
                   "trm_reference/steadyrank_arrays": ref_scaled / arrays_s,
                   "steadyrank_dicts/pytrec_eval": dicts_s / pytrec_s},
        "argpartition_floor": floor,
        "environment": {"numpy": np.__version__, "cpu_flags": sorted(cpu_flags())},
        "peak_memory_over_input": peak / input_bytes,
        "max_abs_diff_expected_vs_trm_reference": float(agreement),
        "summary": {m: {k: result.summary[m][k] for k in ("expected", "min", "max", "range", "oblivious", "bias")}
                    for m in MEASURES},
    }
    rows = [
        [f"numpy argpartition floor (median of {args.rounds})", floor["floor_median_s"],
         floor["floor_median_s"] / floor["engine_median_s"]],
        [f"steadyrank (arrays; median of {args.rounds}, interleaved with the floor: "
         f"{floor['engine_over_floor']:.2f}x it)", floor["engine_median_s"], floor["engine_median_s"] / arrays_s],
        ["steadyrank (arrays, tie-aware: E/min/max/obl/PROC)", arrays_s, 1.0],
        ["steadyrank (dicts, same)", dicts_s, dicts_s / arrays_s],
        ["pytrec_eval (oblivious only)", pytrec_s, pytrec_s / arrays_s],
        ["ranx (oblivious only, warm JIT)", ranx_s, ranx_s / arrays_s],
        [f"TRM reference (scaled from {n_ref} queries)", ref_scaled, ref_scaled / arrays_s],
    ]
    if args.out:
        payload = write_json(args.out, payload)
    emit(payload, ["system", "seconds", "× steadyrank arrays"], rows, json_only=args.json)


if __name__ == "__main__":
    main()

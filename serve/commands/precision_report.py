"""``steadyrank precision-report``: how much low precision moves a ranking, and how much HPS gets back.

Yang et al.'s protocol (Tables 1, 3–5, Figure 3): the same candidates are scored under each regime
(FP32, BF16/FP16 native, BF16/FP16 with HPS) with one forward pass per model dtype, then compared
with tie-aware metrics, tie statistics at k and Spearman ρ against FP32 (always computed as the
reference). Only judged queries (in both queries.jsonl and the qrels split) are scored.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from steadyrank import metrics
from steadyrank.serve.output import dumps_json
from steadyrank.serve.precision import candidates as first_stage
from steadyrank.serve.precision.plot import plot_curves
from steadyrank.serve.precision.regimes import DEFAULT_REGIMES, REFERENCE, parse_regime, parse_regimes
from steadyrank.serve.precision.report import build_report, curves, render_tables
from steadyrank.serve.precision.scoring import PooledStore, bi_encoder_keys, pair_keys
from steadyrank.serve.runtime import ModelSettings
from steadyrank.serve.runtime.inspection import inspect_model, model_id
from steadyrank.serve.runtime.precision import choose_for

DEFAULT_MEASURES = ["map@3", "ndcg@10", "mrr@10"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "precision-report",
        help="score one candidate set under FP32/BF16/FP16 with and without HPS and compare",
        description=(
            "Score every judged query's candidates under each precision regime (one forward pass per "
            "model dtype) and report, per regime, the tie-aware metrics (oblivious on the first-stage "
            "order, expected, min, max, range, bias), the mean number of unique scores and the mean "
            "tie-group size at k in {1,3,5,10,20,50,100}, and the mean Spearman rho against FP32."
        ),
    )
    parser.add_argument("--model", default=None, help="local model directory (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--data", required=True, help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv")
    parser.add_argument("--split", default="test", help="qrels split (default: test)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--candidates", metavar="RUN", help="TREC run giving each query's candidates")
    source.add_argument("--first-stage", choices=["bm25", "dense"], default="bm25",
                        help="retrieve candidates from the corpus: bm25 (bm25s, default) or dense "
                             "(exact FP32 search with --model, which must be a bi-encoder)")
    parser.add_argument("--depth", type=int, default=100, help="candidates per query (default 100)")
    parser.add_argument("--regimes", default=DEFAULT_REGIMES,
                        help="comma-separated, from fp32 bf16 bf16+hps fp16 fp16+hps int8 int8+hps (CPU only) auto "
                             f"auto+hps (what precision: auto picks here) (default {DEFAULT_REGIMES})")
    parser.add_argument("-m", "--measure", action="append", dest="measures", metavar="METRIC@K",
                        help=f"repeatable; default: {' '.join(DEFAULT_MEASURES)}")
    parser.add_argument("--rel-level", type=float, default=1,
                        help="binary relevance threshold: grade >= N is relevant (default 1)")
    parser.add_argument("--batch-size", type=int, default=32,
                        help="sequences per forward batch, sorted by length and padded per batch (default 32)")
    parser.add_argument("--max-length", type=int, default=512, help="tokens per sequence (default 512; "
                        "a sentence-transformers model's own max_seq_length caps it)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="default: auto")
    parser.add_argument("--strict", action="store_true",
                        help="refuse a corpus holding documents with an empty text (default: skip them with a "
                             "warning naming the first few ids; the report records how many)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--plot", type=Path, metavar="OUT.png",
                        help="write metric-against-k curves per regime ([min, max] band, E[M] marked) as PNG")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.depth < 1 or args.batch_size < 1:
        raise ValueError("--depth and --batch-size must be positive")
    started = time.perf_counter()
    regimes = parse_regimes(args.regimes)
    measures = [str(m) for m in metrics.parse_measures(args.measures or DEFAULT_MEASURES)]
    base = ModelSettings(path=args.model, max_length=args.max_length, device=args.device,
                         batch_size=args.batch_size, batch_tokens=args.batch_size * args.max_length,
                         rescore_boundary_ties=False)
    spec = inspect_model(base)
    data = metrics.read_beir(args.data, args.split, strict=args.strict)
    if data.skipped_empty:
        total = len(data.corpus) + len(data.skipped_empty)
        warning = metrics.skipped_empty_warning(Path(args.data) / "corpus.jsonl", data.skipped_empty, total)
        print(f"warning: {warning}", file=sys.stderr)
    queries = {q: data.queries[q] for q in data.qrels if q in data.queries}
    if not queries:
        raise ValueError(f"{args.data}: no query of queries.jsonl is judged in qrels/{args.split}.tsv")
    doc_ids = list(data.corpus)
    texts = {d: _full_text(data.corpus[d]) for d in doc_ids}
    store = PooledStore(base, show_progress=True)  # tqdm bars go to stderr

    if args.candidates:
        pool, source = first_stage.from_run(args.candidates, list(queries), data.corpus, args.depth), args.candidates
    elif args.first_stage == "dense":
        if spec.kind != "bi-encoder":
            raise ValueError(f"--first-stage dense needs a bi-encoder model, {spec.path} is a {spec.kind}")
        pool, source = first_stage.dense(queries, doc_ids, [texts[d] for d in doc_ids], args.depth, store.embed_fp32), "dense"
    else:
        pool, source = first_stage.bm25(queries, doc_ids, [texts[d] for d in doc_ids], args.depth), "bm25"

    scored = [parse_regime(REFERENCE)] + [r for r in regimes if r.name != REFERENCE]
    if spec.kind == "bi-encoder":
        keys = bi_encoder_keys(store, scored, queries, texts, pool)
        work = {"texts_encoded": store.encoded}
    else:
        keys, pairs = pair_keys(base, scored, queries, texts, pool, show_progress=True)
        work = {"pairs_scored": pairs}
    report = {
        "model": model_id(spec),
        "kind": spec.kind,
        "data": str(args.data),
        "split": args.split,
        "candidates": {"source": source, "depth": args.depth, "queries": len(pool),
                       "pairs": sum(len(d) for d in pool.values())},
        "skipped_empty": len(data.skipped_empty),
        "rel_level": args.rel_level,
        "work": {**work, "seconds": round(time.perf_counter() - started, 1)},
        "auto": choose_for("auto", args.device).facts(),
        **build_report(keys, regimes, pool, data.qrels, measures, args.rel_level),
    }
    if args.plot:
        names = list(dict.fromkeys(m.split("@")[0] for m in measures))
        requested = {r.name: keys[r.name] for r in regimes}
        plot_curves(curves(requested, pool, data.qrels, names, args.rel_level), args.plot)
    print(dumps_json(report) if args.json else render_tables(report))
    return 0


def _full_text(document: dict) -> str:
    """``title + " " + text`` (text alone when there is no title), as retrieval indexes it."""
    return f"{document['title']} {document['text']}" if document.get("title") else document["text"]

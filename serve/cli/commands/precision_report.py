"""``steadyrank precision-report``: how much low precision moves a ranking, and how much HPS gets back.

Yang et al.'s protocol (Tables 1, 3–5, Figure 3): the same candidates are scored under each regime
(FP32, BF16/FP16 native, BF16/FP16 with HPS) with one forward pass per model dtype, then compared
with tie-aware metrics, tie statistics at k and Spearman ρ against FP32 (always computed as the
reference). Only judged queries (in both queries.jsonl and the qrels split) are scored.

The model is the served reranker, resolved as ``steadyrank search`` resolves it (``--config``, else
``$STEADYRANK_SETTINGS``, else the embedded default; ``--model``, ``--max-length`` and ``--device``
over it): the report scores what the server serves, printed on stderr and in the report (``settings``,
``scored_model``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from steadyrank.metrics import parse_measures, read_qrels
from steadyrank.retrieval.corpus import read_queries
from steadyrank.serve.cli.commands.served import add_config_argument, served_run
from steadyrank.serve.cli.options import add_corpus_arguments, add_deprecated_alias, load_corpus
from steadyrank.serve.output import dumps_json
from steadyrank.serve.runtime import ModelSettings
from steadyrank.serve.runtime.inspection import inspect_model, model_id
from steadyrank.serve.runtime.precision import choose_for
from steadyrank.serve.runtime.resolution import scoring_json
from steadyrank.serve.tools.precision import candidates as first_stage
from steadyrank.serve.tools.precision.plot import plot_curves
from steadyrank.serve.tools.precision.regimes import DEFAULT_REGIMES, REFERENCE, parse_regime, parse_regimes
from steadyrank.serve.tools.precision.report import build_report, curves, render_tables
from steadyrank.serve.tools.precision.scoring import PooledStore, bi_encoder_keys, pair_keys

DEFAULT_MEASURES = ("map@3", "ndcg@10", "mrr@10")


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
    add_config_argument(parser)
    parser.add_argument("--model", default=None,
                        help="local model directory, or 'bundled' (default: the served reranker of --config; the "
                             "embedded default's is the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--data", required=True, help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv")
    add_corpus_arguments(parser, required=False, help="corpus to score instead of DATA's (default: the BEIR folder DATA)")
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
    parser.add_argument("--batch-size", type=int, default=32, metavar="SEQUENCES",
                        help="sequences (query-document pairs or texts) per forward batch, sorted by length and "
                             "padded per batch (default 32)")
    parser.add_argument("--max-length", type=int, default=None, help="tokens per sequence (default: the served "
                        "reranker's max_length; a sentence-transformers model's own max_seq_length caps it)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None,
                        help="default: the served reranker's device")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--plot-out", dest="plot_out", type=Path, default=None, metavar="FILE",
                        help="PNG file to write: metric-against-k curves per regime ([min, max] band, E[M] marked)")
    add_deprecated_alias(parser, "--plot", "--plot-out", "plot_out", type=Path)
    parser.set_defaults(func=run)


def report_model(served: ModelSettings, max_length: int | None, device: str | None, batch_size: int) -> ModelSettings:
    """The served reranker section as the report scores it: ``--max-length`` and ``--device`` over it
    when given, ``batch_size`` sequences per forward batch, and no boundary-tie re-scoring (the report
    compares the regimes' own keys); each regime then sets precision and scoring."""
    length = served.max_length if max_length is None else max_length
    return ModelSettings.model_validate({**served.model_dump(), "max_length": length,
                                         "device": served.device if device is None else device,
                                         "batch_size": batch_size, "batch_tokens": batch_size * length,
                                         "rescore_boundary_ties": False})


def run(args: argparse.Namespace) -> int:
    if args.depth < 1 or args.batch_size < 1:
        raise ValueError("--depth and --batch-size must be positive")
    started = time.perf_counter()
    regimes = parse_regimes(args.regimes)
    measures = [str(m) for m in parse_measures(args.measures or DEFAULT_MEASURES)]
    served = served_run(argparse.Namespace(config=args.config, rerank=args.model))
    assert served.reranker is not None, "served_run reranks unless told --no-rerank"
    print(served.describe(), file=sys.stderr)
    base = report_model(served.reranker, args.max_length, args.device, args.batch_size)
    spec = inspect_model(base)
    if not Path(args.data).is_dir():
        raise FileNotFoundError(f"{args.data}: not a directory (--data is a BEIR folder)")
    corpus = load_corpus(args, args.corpus or args.data)
    qrels = read_qrels(Path(args.data) / "qrels" / f"{args.split}.tsv")
    all_queries = read_queries(args.data)
    queries = {q: all_queries[q] for q in qrels if q in all_queries}
    if not queries:
        raise ValueError(f"{args.data}: no query of its queries file is judged in qrels/{args.split}.tsv")
    texts = {d.id: d.full_text for d in corpus.documents}
    doc_ids = list(texts)
    store = PooledStore(base, show_progress=True)  # tqdm bars go to stderr

    if args.candidates:
        pool, source = first_stage.from_run(args.candidates, list(queries), texts, args.depth), args.candidates
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
        "corpus": str(corpus.source),
        "skipped_empty": len(corpus.skipped_empty),
        "rel_level": args.rel_level,
        "work": {**work, "seconds": round(time.perf_counter() - started, 1)},
        "auto": choose_for("auto", base.device).facts(),
        "settings": served.to_json(),
        "scored_model": scoring_json(base),
        **build_report(keys, regimes, pool, qrels, measures, args.rel_level),
    }
    if args.plot_out:
        names = list(dict.fromkeys(m.split("@")[0] for m in measures))
        requested = {r.name: keys[r.name] for r in regimes}
        plot_curves(curves(requested, pool, qrels, names, args.rel_level), args.plot_out)
    print(dumps_json(report) if args.json else render_tables(report))
    return 0


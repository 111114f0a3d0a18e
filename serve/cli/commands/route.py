"""``steadyrank route calibrate``: pick dynamic-K thresholds on a golden set and write a settings file."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from tqdm import tqdm

from steadyrank.metrics.io import read_qrels
from steadyrank.retrieval.calibration import DEFAULT_MEASURE, OBJECTIVES, calibrate, fit_model, observe
from steadyrank.retrieval.corpus import read_queries
from steadyrank.retrieval.index import open_index
from steadyrank.retrieval.pipeline import rerank_candidates
from steadyrank.retrieval.routing import MODEL_FEATURES, RoutingSettings, save_settings
from steadyrank.serve.cli.commands.index import BUNDLED
from steadyrank.serve.cli.commands.search import add_reranker_arguments, add_routing_arguments
from steadyrank.serve.cli.commands.served import served_run
from steadyrank.serve.cli.options import add_deprecated_alias, add_grade_map_argument, require
from steadyrank.serve.output import dumps_json, format_table

TREC_RUBRIC = "3:5,2:4,1:3,0:1"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("route", help="dynamic-K routing: calibrate thresholds")
    commands = parser.add_subparsers(dest="route_command", metavar="ACTION", required=True)
    calibrate_parser = commands.add_parser(
        "calibrate",
        help="choose routing thresholds on a golden set (BEIR folder with qrels)",
        description=(
            "Retrieve and rerank every judged query of the BEIR folder to DEPTH once, compute the "
            "routing signals from the first k_low reranker scores, and measure per query the gain of "
            "reranking DEPTH instead of k_low (default RA-nWG@30). Then choose thresholds: objective "
            "'efficiency' maximises the gain per extra reranked candidate while recovering at least "
            "--min-recovery of the total gain; 'rate' maximises the gain with an escalation rate of at "
            "most --target-rate. Writes {\"routing\": settings, \"calibration\": in-sample effect} as JSON "
            "to --settings-out, for 'steadyrank search --route-settings'."
        ),
    )
    calibrate_parser.add_argument("--data", required=True, metavar="BEIR_DIR",
                                  help="BEIR folder: queries.jsonl and qrels/<split>.tsv (its corpus is the index's)")
    calibrate_parser.add_argument("--index", required=True, metavar="DIR", help="index built from the folder's corpus")
    calibrate_parser.add_argument("--settings-out", dest="settings_out", default=None, metavar="FILE",
                                  help="routing settings JSON file to write (read by 'steadyrank search --route-settings')")
    add_deprecated_alias(calibrate_parser, "--out", "--settings-out", "settings_out")
    require(calibrate_parser, "settings_out", "--settings-out")
    calibrate_parser.add_argument("--split", default="test", help="qrels split (default %(default)s)")
    add_routing_arguments(calibrate_parser)
    add_reranker_arguments(calibrate_parser, optional=False)
    calibrate_parser.add_argument("--objective", choices=OBJECTIVES, default="efficiency",
                                  help="what the thresholds optimise (default %(default)s)")
    calibrate_parser.add_argument("--model", action="store_true",
                                  help="fit a logistic routing model over all signals (boundary gap, tail mass, "
                                       "first-stage gap, overlap, margin, entropy) and choose its probability "
                                       "threshold by the objective, instead of per-signal thresholds")
    calibrate_parser.add_argument("--model-features", default=",".join(MODEL_FEATURES), metavar="F,...",
                                  help="--model: the signals it may read, comma-separated (default all: %(default)s); "
                                       "one signal gives a single fitted threshold on it, e.g. boundary_gap")
    calibrate_parser.add_argument("--min-recovery", type=float, default=0.9,
                                  help="efficiency: fraction of the escalate-always gain to keep (default %(default)s)")
    calibrate_parser.add_argument("--target-rate", type=float, default=0.35,
                                  help="rate: largest fraction of queries escalated (default %(default)s)")
    calibrate_parser.add_argument("--measure", default=DEFAULT_MEASURE, help="gain measure (default %(default)s)")
    add_grade_map_argument(calibrate_parser, default=TREC_RUBRIC,
                           help=f"map grades onto the 1-5 rubric for the set metrics (default {TREC_RUBRIC}, TREC DL)")
    calibrate_parser.add_argument("--rel-level", type=float, default=1,
                                  help="binary relevance threshold for binary measures (default %(default)s)")
    calibrate_parser.add_argument("--margin-at", type=int, default=RoutingSettings.margin_at,
                                  help="dense margin = cos@1 - cos@N (default %(default)s)")
    calibrate_parser.add_argument("--overlap-at", type=int, default=RoutingSettings.overlap_at,
                                  help="overlap of the dense and BM25 top N (default %(default)s)")
    calibrate_parser.add_argument("--entropy-temperature", type=float, default=RoutingSettings.entropy_temperature,
                                  help="softmax temperature of the entropy signal, in score units (default %(default)s)")
    calibrate_parser.add_argument("--json", action="store_true", help="print the settings file as JSON")
    calibrate_parser.set_defaults(func=run_calibrate)


def run_calibrate(args: argparse.Namespace) -> int:
    served = served_run(args)
    assert served.reranker is not None  # calibrate has no --no-rerank
    base = replace(served.policy, margin_at=args.margin_at, overlap_at=args.overlap_at,
                   entropy_temperature=args.entropy_temperature)
    qrels = read_qrels(f"{args.data}/qrels/{args.split}.tsv")
    queries = {q: t for q, t in read_queries(args.data).items() if q in qrels}
    if not queries:
        raise ValueError(f"no query of {args.data}'s queries file has judgments in qrels/{args.split}.tsv")
    from steadyrank.serve.runtime import load_embedder, load_scorer

    print(served.describe(), file=sys.stderr)
    embedder = None if served.mode == "bm25" else load_embedder(served.embedder)
    reranker = load_scorer(served.reranker, calibration=served.calibration)
    print(f"reranker precision: {reranker.precision_choice.line()}", file=sys.stderr)
    rankings = {}
    with open_index(args.index, embedder) as store:
        for qid, text in tqdm(queries.items(), desc="reranking to k_high", unit="query", file=sys.stderr):
            candidates = store.search(text, mode=served.mode, depth=base.k_high, rrf_k=served.rrf_k,
                                      rrf_weights=served.rrf_weights)
            rankings[qid] = rerank_candidates(store, text, candidates, reranker, base, "fixed100")
    observations = observe(rankings, qrels, base, measure=args.measure, rubric_map=args.grade_map, rel_level=args.rel_level)
    features = [f for f in args.model_features.split(",") if f] if args.model else None
    if features is not None:
        result = fit_model(observations, base, objective=args.objective, target_rate=args.target_rate,
                           min_recovery=args.min_recovery, measure=args.measure, features=features)
    else:
        result = calibrate(observations, base, objective=args.objective, target_rate=args.target_rate,
                           min_recovery=args.min_recovery, measure=args.measure)
    provenance = {
        **result.to_json(), "data": str(args.data), "split": args.split, "index": str(args.index),
        "mode": served.mode, "reranker": served.reranker.path or BUNDLED, "model": args.model,
        "model_features": features, "rerank_precision": served.reranker.precision, "settings": served.to_json(),
        "min_recovery": args.min_recovery if args.objective == "efficiency" else None,
        "target_rate": args.target_rate if args.objective == "rate" else None,
    }
    save_settings(args.settings_out, result.settings, provenance)
    if args.json:
        print(dumps_json({"routing": result.settings.to_json(), "calibration": provenance}))
        return 0
    s = result.settings
    print(format_table(["setting", "value"], [
        ["margin_below", s.margin_below], ["entropy_above", s.entropy_above],
        ["tie_enabled", str(s.tie_enabled)], ["overlap_below", s.overlap_below],
        ["model features", ", ".join(s.model_features) or "-"], ["model_above", s.model_above],
        ["escalation rate", result.escalation_rate], [f"{result.measure} gain recovered", result.recovered],
        ["mean candidates reranked", result.mean_reranked],
        ["  (fixed k_high)", result.mean_reranked_high],
    ]))
    print(f"wrote {args.settings_out} (in-sample on {result.n_queries} queries; validate on held-out queries)")
    return 0

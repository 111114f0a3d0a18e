"""``steadyrank evaluate``: tie-aware evaluation of a TREC run against qrels."""

from __future__ import annotations

import argparse
import sys

from steadyrank.metrics import evaluate, read_qrels, read_trec_run
from steadyrank.serve.commands.options import add_grade_map_argument
from steadyrank.serve.output import dumps_json, format_table

DEFAULT_MEASURES = ["ndcg@10", "mrr@10", "map@10", "recall@100"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="tie-aware evaluation of a TREC run (expected, min, max, range, bias per metric)",
        description=(
            "Evaluate a TREC run against qrels over all orders of tied scores. For each METRIC@K: "
            "E (expected over tie orders), min, max, range = max - min, the tie-oblivious value on "
            "one fixed order, bias = oblivious - E, PROC (best ordering of the run's own candidates) "
            "and %PROC = E / PROC. Metrics: hits recall precision f1 ndcg ndcg_exp mrr map err "
            "ra_nwg nrecall4 nrecall5 precision4 harm."
        ),
    )
    parser.add_argument("--qrels", required=True, help="TREC qrels (qid 0 docid grade) or BEIR qrels tsv")
    parser.add_argument("--run", required=True, help="TREC run (qid Q0 docid rank score tag)")
    parser.add_argument("-m", "--measure", action="append", dest="measures", metavar="METRIC@K",
                        help=f"repeatable; default: {' '.join(DEFAULT_MEASURES)}")
    parser.add_argument("--rel-level", type=float, default=1,
                        help="binary relevance threshold: grade >= N is relevant (default 1, as trec_eval -l)")
    parser.add_argument("--tie-break", choices=["input", "docid"], default="input",
                        help="order of the tie-oblivious value: input = run file line order (default), "
                             "docid = trec_eval's docid descending")
    parser.add_argument("--gmax", type=float, default=None,
                        help="ERR's maximum grade (default: the largest grade in the qrels)")
    add_grade_map_argument(parser, default=None,
                           help="map grades onto the 1-5 rubric for ra_nwg/nrecall/precision4/harm, "
                                "e.g. 3:5,2:4,1:3,0:1 (0 also maps unjudged documents)")
    parser.add_argument("--per-query", action="store_true", help="also report every query")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    qrels = read_qrels(args.qrels)
    trec_run = read_trec_run(args.run)
    result = evaluate(
        trec_run, qrels, args.measures or DEFAULT_MEASURES, rel_level=args.rel_level,
        tie_break=args.tie_break, gmax=args.gmax, rubric_map=args.grade_map,
    )
    skipped = len(set(trec_run) - set(qrels))
    if not result.query_ids:
        raise ValueError("no query is in both the run and the qrels")
    if args.json:
        payload: dict = {
            "metrics": result.summary,
            "queries": {"evaluated": len(result.query_ids), "run_only": skipped,
                        "qrels_only": len(set(qrels) - set(trec_run))},
        }
        if args.per_query:
            payload["per_query"] = result.per_query
        print(dumps_json(payload))
        return 0
    headers = ["measure", "E", "min", "max", "range", "oblivious", "bias", "PROC", "%PROC", "n", "NA"]
    rows = [
        [name, s["expected"], s["min"], s["max"], s["range"], s["oblivious"], s["bias"], s["proc"],
         s["proc_ratio"], s["n_valid"], s["n_na"]]
        for name, s in result.summary.items()
    ]
    print(format_table(headers, rows))
    if args.per_query:
        for qid, per_measure in result.per_query.items():
            print(f"\nquery {qid}")
            print(format_table(["measure", "E", "min", "max", "range", "oblivious", "bias"],
                               [[m, *(v[k] for k in ("expected", "min", "max", "range", "oblivious", "bias"))]
                                for m, v in per_measure.items()]))
    if skipped:
        print(f"note: {skipped} run queries have no qrels and were not evaluated", file=sys.stderr)
    return 0

"""``steadyrank evaluate``: tie-aware evaluation of a TREC run against qrels.

Beyond the per-metric statistics: RA-nWG's parameters and their sensitivity grid
(``--rarity-*``, ``--ra-sensitivity``), the optional set metrics' inputs (``--sources`` for
``ra_nwg_novelty``, ``--udcg-labels`` for ``udcg``, ``--answers`` for Acc|Hit@K), swap rates
between runs (``--compare-run``, ``--swap-rate``) and the spread of each metric across cutoffs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from steadyrank.metrics import ItemLabels, MetricParams, evaluate, read_qrels, read_trec_run
from steadyrank.metrics.answers import accuracy_given_hit
from steadyrank.metrics.evaluate import Evaluation
from steadyrank.metrics.io import read_answers, read_sources, read_udcg_labels
from steadyrank.metrics.measures import parse_measures
from steadyrank.metrics.sensitivity import DEFAULT_ALPHAS, DEFAULT_CAPS, ra_nwg_sensitivity
from steadyrank.metrics.swap import ORDRANKBEN_CUTOFFS, cutoff_spread, swap_rates
from steadyrank.serve.cli.options import add_grade_map_argument
from steadyrank.serve.output import dumps_json, format_table

DEFAULT_MEASURES = ["ndcg@10", "mrr@10", "map@10", "recall@100"]
_DEFAULTS = MetricParams()


def _floats(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


def _cutoffs(text: str) -> list[int]:
    values = _floats(text)
    if any(v < 1 or v != int(v) for v in values):
        raise argparse.ArgumentTypeError(f"cutoffs must be integers >= 1, got {text!r}")
    return [int(v) for v in values]


def _cap_pairs(text: str) -> list[tuple[float, float]]:
    pairs = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        cap4, sep, cap3 = item.partition(":")
        try:
            pairs.append((float(cap4), float(cap3)))
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad cap pair {item!r}: expected CAP4:CAP3, e.g. 1:0.25") from None
        if not sep:
            raise argparse.ArgumentTypeError(f"bad cap pair {item!r}: expected CAP4:CAP3, e.g. 1:0.25")
    if not pairs:
        raise argparse.ArgumentTypeError("expected at least one CAP4:CAP3 pair")
    return pairs


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="tie-aware evaluation of a TREC run (expected, min, max, range, bias per metric)",
        description=(
            "Evaluate a TREC run against qrels over all orders of tied scores. For each METRIC@K: "
            "E (expected over tie orders), min, max, range = max - min, the tie-oblivious value on "
            "one fixed order, bias = oblivious - E, PROC (best ordering of the run's own candidates) "
            "and %PROC = E / PROC. Metrics: hits recall precision f1 ndcg ndcg_exp mrr map err "
            "ra_nwg nrecall4 nrecall5 precision4 harm hit ra_nwg_novelty (needs --sources) "
            "udcg (needs --udcg-labels)."
        ),
    )
    parser.add_argument("--qrels", required=True, help="TREC qrels (qid 0 docid grade) or BEIR qrels tsv")
    parser.add_argument("--run", required=True, help="TREC run (qid Q0 docid rank score tag)")
    parser.add_argument("-m", "--measure", action="append", dest="measures", metavar="METRIC@K",
                        help=f"repeatable; default: {' '.join(DEFAULT_MEASURES)}")
    parser.add_argument("--cutoffs", type=_cutoffs, default=None, metavar="K,K,...",
                        help="also evaluate every metric of -m at these cutoffs and report its spread across them "
                             f"(OrdRankBen's: {','.join(map(str, ORDRANKBEN_CUTOFFS))})")
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
    ra = parser.add_argument_group("RA-nWG parameters (reported with the results)")
    ra.add_argument("--rarity-alpha", type=float, default=_DEFAULTS.rarity_alpha, metavar="ALPHA",
                    help="rarity exponent: r_g = b_g / p_g^ALPHA (default %(default)s)")
    ra.add_argument("--rarity-cap4", type=float, default=_DEFAULTS.rarity_cap4, metavar="CAP",
                    help="cap of w4 relative to w5 (default %(default)s)")
    ra.add_argument("--rarity-cap3", type=float, default=_DEFAULTS.rarity_cap3, metavar="CAP",
                    help="cap of w3 relative to w5 (default %(default)s)")
    ra.add_argument("--ra-sensitivity", action="store_true",
                    help="report every ra_nwg/ra_nwg_novelty measure over a grid of alpha and caps")
    ra.add_argument("--sensitivity-alphas", type=_floats, default=list(DEFAULT_ALPHAS), metavar="A,A,...",
                    help=f"alphas of the grid (default {','.join(map(str, DEFAULT_ALPHAS))})")
    ra.add_argument("--sensitivity-caps", type=_cap_pairs, default=list(DEFAULT_CAPS), metavar="C4:C3,...",
                    help="cap pairs of the grid (default " + ",".join(f"{a:g}:{b:g}" for a, b in DEFAULT_CAPS) + ")")
    extra = parser.add_argument_group("optional set metrics")
    extra.add_argument("--sources", metavar="FILE", default=None,
                       help="document -> source/facet map for ra_nwg_novelty: lines 'docid source' or JSONL")
    extra.add_argument("--novelty-beta", type=float, default=_DEFAULTS.novelty_beta, metavar="BETA",
                       help="weight of a repeated source in ra_nwg_novelty, in [0, 1) (default %(default)s)")
    extra.add_argument("--udcg-labels", metavar="FILE", default=None,
                       help="UDCG labels: lines 'qid docid utility distraction' ('-' = not given) or JSONL")
    extra.add_argument("--udcg-distraction", type=float, default=_DEFAULTS.udcg_distraction, metavar="LAMBDA",
                       help="UDCG's weight of a distracting passage (default 1/3, the authors' code)")
    extra.add_argument("--answers", metavar="FILE", default=None,
                       help="per-query answer correctness ('qid 1|0' or JSONL) for Acc|Hit@K of every hit@K measure")
    compare = parser.add_argument_group("comparing runs")
    compare.add_argument("--compare-run", action="append", default=[], metavar="FILE",
                         help="another TREC run (repeatable), for --swap-rate and --ra-sensitivity")
    compare.add_argument("--swap-rate", action="store_true",
                         help="swap rate of each measure between the runs over random splits of the queries")
    compare.add_argument("--swap-trials", type=int, default=1000, metavar="N",
                         help="random splits per pair of runs (default %(default)s)")
    compare.add_argument("--swap-seed", type=int, default=0, help="seed of the splits (default %(default)s)")
    parser.add_argument("--per-query", action="store_true", help="also report every query")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.set_defaults(func=run)


def _measures(args: argparse.Namespace) -> list[str]:
    """The -m measures; with --cutoffs, every metric of them at its own and those cutoffs, in order."""
    measures = parse_measures(args.measures or DEFAULT_MEASURES)
    if not args.cutoffs:
        return [str(m) for m in measures]
    cutoffs: dict[str, set[int]] = {}
    for m in measures:
        cutoffs.setdefault(m.name, set(args.cutoffs)).add(m.k)
    return [f"{name}@{k}" for name, ks in cutoffs.items() for k in sorted(ks)]


def _acc_hit(result: Evaluation, answers: dict[str, bool]) -> dict[str, dict[str, Any]]:
    hit_measures = [str(m) for m in result.measures if m.name == "hit"]
    if not hit_measures:
        raise ValueError("--answers reports Acc|Hit@K for hit@K measures: add one, e.g. -m hit@10")
    answered = np.array([q in answers for q in result.query_ids])
    correct = np.array([answers.get(q, False) for q in result.query_ids])
    out: dict[str, dict[str, Any]] = {}
    for measure in hit_measures:
        s = result[measure]
        acc = accuracy_given_hit(*(np.where(answered, x, np.nan) for x in (s.expected, s.min, s.max, s.oblivious, s.proc)),
                                 correct=correct)
        out[f"acc|{measure}"] = {**acc.as_dict(), "unanswered": int((~answered).sum())}
    return out


def run(args: argparse.Namespace) -> int:
    qrels = read_qrels(args.qrels)
    trec_run = read_trec_run(args.run)
    params = MetricParams(rarity_alpha=args.rarity_alpha, rarity_cap4=args.rarity_cap4, rarity_cap3=args.rarity_cap3,
                          novelty_beta=args.novelty_beta, udcg_distraction=args.udcg_distraction)
    utility, distraction = read_udcg_labels(args.udcg_labels) if args.udcg_labels else (None, None)
    labels = ItemLabels(sources=read_sources(args.sources) if args.sources else None,
                        utility=utility, distraction=distraction)
    if args.compare_run and not (args.swap_rate or args.ra_sensitivity):
        raise ValueError("--compare-run is read by --swap-rate and --ra-sensitivity: add one of them")
    if args.swap_rate and not args.compare_run:
        raise ValueError("--swap-rate compares runs: add --compare-run FILE")
    answers = read_answers(args.answers) if args.answers else None
    measures = _measures(args)
    names = {m.partition("@")[0] for m in measures}
    for name, flag, given in (("udcg", "--udcg-labels", args.udcg_labels), ("ra_nwg_novelty", "--sources", args.sources)):
        if name in names and not given:
            raise ValueError(f"{name} needs {flag} FILE")
    options: dict[str, Any] = dict(rel_level=args.rel_level, tie_break=args.tie_break, gmax=args.gmax,
                                   rubric_map=args.grade_map, labels=labels)
    result = evaluate(trec_run, qrels, measures, params=params, **options)
    if not result.query_ids:
        raise ValueError("no query is in both the run and the qrels")
    runs = {args.run: trec_run, **{path: read_trec_run(path) for path in args.compare_run}}
    summary = result.summary
    payload: dict[str, Any] = {
        "metrics": summary,
        "parameters": params.as_dict(),
        "queries": {"evaluated": len(result.query_ids), "run_only": len(set(trec_run) - set(qrels)),
                    "qrels_only": len(set(qrels) - set(trec_run))},
    }
    spread = cutoff_spread({m: float(s["expected"]) for m, s in summary.items()})
    if spread:
        payload["cutoff_spread"] = spread
    if answers is not None:
        payload["acc_hit"] = _acc_hit(result, answers)
    if args.swap_rate:
        payload["swap_rate"] = _swap_report(runs, qrels, measures, params, options, args)
    if args.ra_sensitivity:
        baseline, points = ra_nwg_sensitivity(runs, qrels, measures, alphas=args.sensitivity_alphas,
                                              caps=args.sensitivity_caps, baseline=params, **options)
        payload["sensitivity"] = {"baseline": baseline.as_dict(), "points": [p.as_dict() for p in points]}
    if args.per_query:
        payload["per_query"] = result.per_query
    if args.json:
        print(dumps_json(payload))
        return 0
    _print_tables(payload, result)
    if payload["queries"]["run_only"]:
        print(f"note: {payload['queries']['run_only']} run queries have no qrels and were not evaluated",
              file=sys.stderr)
    return 0


def _aligned(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``values`` (one per evaluated query) at ``rows`` (-1: the query was not evaluated → NaN)."""
    if values.size == 0:
        return np.full(rows.size, np.nan)
    return np.where(rows >= 0, values[np.maximum(rows, 0)], np.nan)


def _swap_report(runs: dict[str, Any], qrels: Any, measures: list[str], params: MetricParams,
                 options: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    query_ids = sorted(set(qrels))
    per_query: dict[str, dict[str, np.ndarray]] = {}
    for name, trec_run in runs.items():
        result = evaluate(trec_run, qrels, measures, params=params, **options)
        index = {q: i for i, q in enumerate(result.query_ids)}
        rows = np.array([index.get(q, -1) for q in query_ids], dtype=np.int64)
        per_query[name] = {m: _aligned(result[m].expected, rows) for m in measures}
    rates = swap_rates(per_query, measures, trials=args.swap_trials, seed=args.swap_seed)
    return {"runs": list(runs), "trials_per_pair": args.swap_trials, "seed": args.swap_seed,
            "measures": [r.as_dict() for r in rates]}


def _print_tables(payload: dict[str, Any], result: Evaluation) -> None:
    p = payload["parameters"]
    headers = ["measure", "E", "min", "max", "range", "oblivious", "bias", "PROC", "%PROC", "n", "NA"]
    rows = [
        [name, s["expected"], s["min"], s["max"], s["range"], s["oblivious"], s["bias"], s["proc"],
         s["proc_ratio"], s["n_valid"], s["n_na"]]
        for name, s in payload["metrics"].items()
    ]
    print(format_table(headers, rows))
    if any(m.name in ("ra_nwg", "ra_nwg_novelty", "udcg") for m in result.measures):
        print(f"\nparameters: rarity alpha {p['rarity_alpha']:g}, caps {p['rarity_cap4']:g}/{p['rarity_cap3']:g}, "
              f"novelty beta {p['novelty_beta']:g}, udcg lambda {p['udcg_distraction']:.4g}")
    if "cutoff_spread" in payload:
        print("\nspread across cutoffs (mean E per cutoff; population std)")
        print(format_table(["metric", "cutoffs", "std"], [[name, " ".join(f"{k}:{v:.4f}" for k, v in
                                                             zip(s["cutoffs"], s["means"], strict=True)), s["std"]]
                                                          for name, s in payload["cutoff_spread"].items()]))
    if "acc_hit" in payload:
        print("\nAcc|Hit@K (answer accuracy on the queries whose top K holds the whole gold set)")
        print(format_table(["measure", "E", "min", "max", "oblivious", "PROC", "E[hits]", "queries", "unanswered"],
                           [[name, a["expected"], a["min"], a["max"], a["oblivious"], a["proc"], a["expected_hits"],
                             a["n_queries"], a["unanswered"]] for name, a in payload["acc_hit"].items()]))
    if "swap_rate" in payload:
        report = payload["swap_rate"]
        print(f"\nswap rates over {report['trials_per_pair']} random query splits per pair of runs "
              f"({len(report['runs'])} runs), by |difference| on the first half")
        rows = []
        for m in report["measures"]:
            rows.append([m["measure"], "all", m["splits"], m["swaps"], m["rate"]])
            rows += [["", f"[{b['low']:.2f}, {'inf' if b['high'] is None else format(b['high'], '.2f')})",
                      b["splits"], b["swaps"], b["rate"]] for b in m["bins"]]
        print(format_table(["measure", "|d|", "splits", "swaps", "rate"], rows))
    if "sensitivity" in payload:
        points = payload["sensitivity"]["points"]
        runs = list(points[0]["mean"]) if points else []
        measures = list(points[0]["mean"][runs[0]]) if runs else []
        print("\nRA-nWG sensitivity (mean E per run; delta from the baseline parameters; same order of runs?)")
        headers = ["alpha", "cap4", "cap3", "measure"] + [f"E {i + 1}" for i in range(len(runs))] + \
            [f"delta {i + 1}" for i in range(len(runs))] + ["max |dq|", "same order"]
        rows = [[f"{pt['alpha']:g}", f"{pt['cap4']:g}", f"{pt['cap3']:g}", m] + [pt["mean"][r][m] for r in runs]
                + [pt["delta"][r][m] for r in runs] + [max(pt["max_query_delta"][r][m] for r in runs),
                                                       "yes" if pt["same_order"][m] else "NO"]
                for pt in points for m in measures]
        print(format_table(headers, rows))
        for i, r in enumerate(runs):
            print(f"  run {i + 1}: {r}")
    if "per_query" in payload:
        for qid, per_measure in payload["per_query"].items():
            print(f"\nquery {qid}")
            print(format_table(["measure", "E", "min", "max", "range", "oblivious", "bias"],
                               [[m, *(v[k] for k in ("expected", "min", "max", "range", "oblivious", "bias"))]
                                for m, v in per_measure.items()]))

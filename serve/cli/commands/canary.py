"""``steadyrank canary report``: the canary comparison of a running server (``GET /v1/canary``)."""

from __future__ import annotations

import argparse

from steadyrank.serve.cli.options import API_KEYS_ENV, api_key_from_env, fetch_json
from steadyrank.serve.output import dumps_json, format_table


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("canary", help="canary comparison of a running steadyrank server")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    report = actions.add_parser(
        "report",
        help="paired tie-aware deltas, agreement, latency and the promote|hold|rollback verdict",
        description="Fetch GET /v1/canary from a running server and print the comparison of the canary "
                    "variant against the primary over golden queries.",
    )
    report.add_argument("--url", default="http://127.0.0.1:8000", help="server base URL (default %(default)s)")
    report.add_argument("--api-key", default=None,
                        help=f"bearer API key (default: the first key of ${API_KEYS_ENV}, the server's variable; "
                             "the old $STEADYRANK_API_KEY is still read, with a deprecation warning)")
    report.add_argument("--timeout", type=float, default=30.0, help="HTTP timeout in seconds")
    report.add_argument("--json", action="store_true", help="print the report as one JSON object")
    report.set_defaults(func=run_report)


def fetch_report(url: str, api_key: str | None, timeout: float) -> dict:
    return fetch_json(url, "/v1/canary", api_key, timeout)


def run_report(args: argparse.Namespace) -> int:
    report = fetch_report(args.url, args.api_key if args.api_key is not None else api_key_from_env(), args.timeout)
    if args.json:
        print(dumps_json(report))
        return 0
    print(f"verdict: {report.get('verdict')}  (paired golden queries: {report.get('paired_queries', 0)})")
    for reason in report.get("reasons", []):
        print(f"  - {reason}")
    rows = [
        [name, m["delta"]["point"], m["delta"]["low"], m["delta"]["high"], m["worst"]["low"], m["best"]["high"],
         "yes" if m["ranges_overlap"] else "no"]
        for name, m in report.get("metrics", {}).items()
    ]
    if rows:
        print(format_table(["measure", "delta", "CI low", "CI high", "worst low", "best high", "TRM overlap"], rows))
    if "latency" in report:
        lat = report["latency"]
        print(f"p95 replay latency: primary {lat['primary_p95_s']:.4f}s, canary {lat['canary_p95_s']:.4f}s")
    if "agreement" in report:
        agr = report["agreement"]
        print(f"mirrored traffic: n={agr['n']}, top-10 overlap {agr['top10_overlap']}, Kendall tau {agr['kendall_tau']}")
    return 0

"""``steadyrank golden build|audit``: build a golden set from an index with a judge; audit it."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

from steadyrank.serve.cli.options import API_KEYS_ENV, api_key_from_env, fetch_json
from steadyrank.serve.output import dumps_json, format_table

SETTINGS_HELP = "build settings JSON/YAML (pool, prune, refine sections; flags override it)"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "golden", help="build a golden set (pool → judge → prune → Plackett–Luce refinement) and audit it",
        description="Golden sets for the shadow evaluator, built from your own index and judge.",
    )
    commands = parser.add_subparsers(dest="golden_command", metavar="ACTION", required=True)
    build = commands.add_parser(
        "build", help="pool, judge, prune and refine; write DIR/golden.jsonl, audit/, summary.json",
        description=(
            "Per query: pool the dense, BM25 and hybrid candidates of every --index (depth --depth), grade each "
            "on the 1-5 rubric with the judge (--judge CONFIG; default: the bundled MiniLM as 'reranker' judge), "
            "keep grade>=3 plus --negatives grade-1/2 candidates (at most --max-pool), then refine the order with "
            "listwise judge calls of --batch-size passages and a confidence-aware Plackett-Luce update with "
            "pairwise locks, until the top --top-k is unchanged for --stable-rounds rounds or --max-calls calls. "
            "State is checkpointed after every judge call: rerun the same command to resume."
        ),
    )
    build.add_argument("--index", action="append", metavar="DIR",
                       help="index directory (repeat for several indexes over the same document ids; required "
                            "unless --from-traffic)")
    build.add_argument("--queries",
                       help="queries file (_id/id and text: JSONL, .jsonl.gz, TSV/CSV, Parquet) or BEIR folder "
                            "(required unless --from-traffic)")
    build.add_argument("--out", required=True, metavar="DIR",
                       help="output folder: golden.jsonl, audit/, summary.json (resumed if it holds this build); "
                            "with --from-traffic: DIR/proposals.jsonl")
    build.add_argument("--from-traffic", metavar="URL", default=None,
                       help="propose new golden queries instead of building: the running server's sampled live "
                            "queries beyond the golden spread (GET /v1/quality/drift/proposals, admin key), one per "
                            "uncovered cluster, written to DIR/proposals.jsonl to review, then judge with "
                            "--queries DIR/proposals.jsonl; needs quality.log_queries: true on the server")
    build.add_argument("--proposals", type=int, default=None, metavar="N",
                       help="with --from-traffic: queries to propose at most (default: the server's "
                            "quality.drift.proposals)")
    build.add_argument("--api-key", default=None,
                       help=f"with --from-traffic: bearer API key, an admin one where keys are configured (default: "
                            f"the first key of ${API_KEYS_ENV})")
    build.add_argument("--timeout", type=float, default=60.0, help="with --from-traffic: HTTP timeout in seconds")
    build.add_argument("--judge", metavar="CONFIG", default=None, help="judge config JSON/YAML (type: reranker | openai-chat)")
    build.add_argument("--settings", metavar="FILE", default=None, help=SETTINGS_HELP)
    build.add_argument("--retrievers", default=None, metavar="LIST", help="comma-separated subset of dense,bm25,hybrid (default all)")
    build.add_argument("--depth", type=int, default=None, help="candidates per retriever list (default 30)")
    build.add_argument("--negatives", type=int, default=None, help="grade-1/2 candidates kept per query (default 5)")
    build.add_argument("--max-pool", type=int, default=None, help="candidates kept per query at most (default 40)")
    build.add_argument("--top-k", type=int, default=None, help="head whose stability stops refinement (default 20)")
    build.add_argument("--batch-size", type=int, default=None, metavar="PASSAGES",
                       help="passages per listwise judge call (default 5)")
    build.add_argument("--max-calls", type=int, default=None, help="listwise calls per query at most (default 60)")
    build.add_argument("--stable-rounds", type=int, default=None, help="rounds the top-k must hold (default 5)")
    build.add_argument("--z", type=float, default=None, help="confidence-bound width of the lock rule (default 3)")
    build.add_argument("--confirmations", type=int, default=None, help="net pairwise wins that lock a preference (default 5)")
    build.add_argument("--seed", type=int, default=None, help="seed of the batch shuffle (default 0)")
    build.add_argument("--embedder", metavar="PATH", default=None,
                       help="bi-encoder the index was built with (default: the bundled all-MiniLM-L6-v2)")
    build.add_argument("--overwrite", action="store_true",
                       help="discard a previous build's state and outputs in DIR (only the files a build "
                            "writes; a directory that holds other files and no build is refused)")
    build.add_argument("--json", action="store_true", help="print the summary as JSON")
    build.set_defaults(func=run_build)

    audit = commands.add_parser("audit", help="summary of a built golden set; agreement with qrels",
                                description="Print GOLDEN_DIR's summary; with --qrels, its tie-aware agreement with "
                                            "existing judgments (Kendall tau-b, graded agreement, RA-nWG@k of the "
                                            "qrels' ideal order under the golden grades, coverage).")
    audit.add_argument("golden_dir", metavar="GOLDEN_DIR")
    audit.add_argument("--qrels", default=None, help="TREC or BEIR qrels file to compare with")
    audit.add_argument("--qrels-rubric", action="store_true",
                       help="the qrels grades are on the 1-5 rubric (like the demo's), not relevance 0-3")
    audit.add_argument("--k", type=int, default=10, help="cutoff of RA-nWG (default %(default)s)")
    audit.add_argument("--json", action="store_true", help="print JSON")
    audit.set_defaults(func=run_audit)

    from_live = commands.add_parser(
        "from-live", help="golden-set queries from live judged samples (quality.live_judging.store)",
        description="Turn the judged /v1/search samples of a live judgments file into golden-set queries "
                    "(the server's golden JSONL: query_id, query, judgments): one per normalised query, the union "
                    "of its samples' grades (later ones win). Review them before use: a live sample judges only "
                    "what was served.")
    from_live.add_argument("store", metavar="JUDGMENTS", help="the judgments file (quality.live_judging.store)")
    from_live.add_argument("--golden-out", required=True, metavar="FILE",
                           help="golden JSONL file to write (replaced atomically)")
    from_live.add_argument("--min-judged", type=int, default=3,
                           help="skip queries with fewer judged documents (default %(default)s)")
    from_live.add_argument("--json", action="store_true", help="print the summary as JSON")
    from_live.set_defaults(func=run_from_live)


def _build_settings(args: argparse.Namespace) -> Any:
    import yaml

    from steadyrank.serve.tools.golden.build import BuildSettings

    raw: dict[str, Any] = {}
    if args.settings:
        path = Path(args.settings)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: settings file not found")
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if args.retrievers is not None:
        raw["retrievers"] = [r.strip() for r in args.retrievers.split(",") if r.strip()]
    for key in ("depth",):
        if getattr(args, key) is not None:
            raw[key] = getattr(args, key)
    for key in ("negatives", "max_pool"):
        if getattr(args, key) is not None:
            raw.setdefault("prune", {})[key] = getattr(args, key)
    for key in ("top_k", "batch_size", "max_calls", "stable_rounds", "z", "confirmations", "seed"):
        if getattr(args, key) is not None:
            raw.setdefault("refine", {})[key] = getattr(args, key)
    from pydantic import ValidationError

    try:
        return BuildSettings.model_validate(raw)
    except ValidationError as exc:
        raise ValueError(f"invalid build settings: {exc}") from None


PROPOSALS_FILE = "proposals.jsonl"


def run_from_traffic(args: argparse.Namespace) -> int:
    """``golden build --from-traffic URL``: the server's drift proposals written to DIR/proposals.jsonl
    (a queries file: ``_id``, ``text``, plus ``distance``, ``support``, ``support_share``), never into
    a golden set; nothing is written when the server has none, and the reason is printed."""
    if args.proposals is not None and args.proposals < 1:
        raise ValueError(f"--proposals must be at least 1, got {args.proposals}")
    out = Path(args.out) / PROPOSALS_FILE
    if out.exists() and not args.overwrite:
        raise ValueError(f"{out} exists: review it, or pass --overwrite to replace it")
    params = {} if args.proposals is None else {"n": args.proposals}
    answer = fetch_json(args.from_traffic, "/v1/quality/drift/proposals",
                        args.api_key if args.api_key is not None else api_key_from_env(), args.timeout, params)
    proposals = answer.get("proposals", [])
    if proposals:
        out.parent.mkdir(parents=True, exist_ok=True)
        from steadyrank.retrieval.fsio import atomic_write_bytes

        atomic_write_bytes(out, "".join(json.dumps({"_id": f"live-{i:03d}", "text": p["query"], "distance": p["distance"],
                                                   "support": p["support"], "support_share": p["support_share"]},
                                                  ensure_ascii=False) + "\n"
                                       for i, p in enumerate(proposals, 1)).encode("utf-8"))
    summary = {"proposals": len(proposals), "file": str(out) if proposals else None, "window": answer.get("window"),
               "uncovered": answer.get("uncovered", 0), "spread": answer.get("spread"), "reason": answer.get("reason")}
    if args.json:
        print(dumps_json(summary))
        return 0
    if not proposals:
        print(f"no proposals: {answer.get('reason', 'the server returned none')}")
        return 0
    print(format_table(["_id", "support", "share", "distance", "query"],
                       [[f"live-{i:03d}", p["support"], f"{p['support_share']:.3f}", f"{p['distance']:.3f}",
                         p["query"][:60]] for i, p in enumerate(proposals, 1)]))
    print(f"{len(proposals)} proposals from {summary['uncovered']} uncovered of {summary['window']} sampled live "
          f"queries (golden spread {summary['spread']:.3f}) written to {out}; review them, then judge with "
          f"`steadyrank golden build --index DIR --queries {out} --out GOLDEN_DIR`")
    return 0


def run_build(args: argparse.Namespace) -> int:
    from contextlib import ExitStack

    if args.from_traffic is not None:
        return run_from_traffic(args)
    if not args.index or args.queries is None:
        raise ValueError("golden build needs --index and --queries (or --from-traffic URL)")

    from steadyrank.retrieval.corpus import read_queries
    from steadyrank.retrieval.store import IndexStore
    from steadyrank.serve.tools.golden.build import GoldenBuild, check_out_dir, lock_out_dir, remove_outputs
    from steadyrank.serve.tools.golden.judges import load_judge_settings, make_judge

    settings = _build_settings(args)
    queries = read_queries(args.queries)
    if not queries:
        raise ValueError(f"{args.queries}: no queries")
    for index in args.index:
        if not Path(index).is_dir():
            raise FileNotFoundError(f"{index}: index directory not found")
    judge_settings = load_judge_settings(args.judge)
    out = Path(args.out)
    check_out_dir(out)
    with ExitStack() as stack:
        embedder = None
        if set(settings.retrievers) != {"bm25"}:
            from steadyrank.serve.cli.commands.index import load_embedder_arg

            embedder = load_embedder_arg(args.embedder)
        names = [Path(p).name or p for p in args.index]
        names = names if len(set(names)) == len(names) else list(args.index)  # provenance keys must differ
        stores = [(name, stack.enter_context(IndexStore.open(p, embedder))) for name, p in zip(names, args.index, strict=True)]
        judge = make_judge(judge_settings)
        judge.check()
        fingerprint = {
            "settings": settings.model_dump(mode="json"),
            "judge": judge_settings.model_dump(mode="json"),
            "prompts_sha256": judge.prompts_fingerprint(),
            "indexes": [{"path": str(Path(p).resolve()), "generation": s.generation, "count": s.count}
                        for p, (_, s) in zip(args.index, stores, strict=True)],
            "queries_sha256": hashlib.sha256(json.dumps(queries, sort_keys=True).encode()).hexdigest(),
        }
        stack.enter_context(lock_out_dir(out))  # one build per folder: refused here, before any judge call
        if args.overwrite:
            remove_outputs(out)
        summary = GoldenBuild(stores, queries, judge, settings, out).run(fingerprint, overwrite=args.overwrite)
    if args.json:
        print(dumps_json(summary))
    else:
        print(f"wrote {out / 'golden.jsonl'} ({summary['queries']} queries); audit in {out / 'audit'}")
        print(_summary_table(summary))
    return 0


def _summary_table(summary: dict[str, Any]) -> str:
    dist = summary["grade_distribution"]
    rows = [
        ["queries", summary["queries"]],
        ["pool size (mean)", summary["pool_size"]["mean"]],
        ["kept per query (mean)", summary["kept"]["mean"]],
        ["grades 1/2/3/4/5", "/".join(str(dist[g]) for g in "12345")],
        ["judge calls (grade + rank)", f"{summary['judge_calls']['grade']} + {summary['judge_calls']['rank']}"],
        ["tokens (prompt + completion)", f"{summary['tokens']['prompt']} + {summary['tokens']['completion']}"],
        ["locks", summary["locks"]["total"]],
        ["rounds per query (mean)", summary["rounds"]["mean"]],
        ["stabilised queries", summary["stabilised_queries"]],
        ["stability round (mean)", summary["stability_round"]["mean"]],
        ["Kendall tau-b grades vs refined (mean)", summary["kendall_tau_b_grades_vs_refined"]["mean"]],
    ]
    return format_table(["", "value"], rows, float_format="{:.3f}")


def run_audit(args: argparse.Namespace) -> int:
    from steadyrank.metrics import read_qrels
    from steadyrank.serve.server.quality.golden_sets import load_golden
    from steadyrank.serve.tools.golden.audit import qrels_agreement
    from steadyrank.serve.tools.golden.build import GOLDEN_FILE, SUMMARY_FILE

    root = Path(args.golden_dir)
    summary_path = root / SUMMARY_FILE
    if not summary_path.is_file():
        raise FileNotFoundError(f"{root}: no {SUMMARY_FILE} (not a finished golden build)")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    report: dict[str, Any] = {"summary": summary}
    if args.qrels:
        golden = load_golden(root / GOLDEN_FILE)
        agreement = qrels_agreement({q.query_id: q.judgments for q in golden.queries.values()},
                                    read_qrels(args.qrels), k=args.k,
                                    qrels_rubric=args.qrels_rubric)
        report["qrels"] = {"file": args.qrels, **agreement}
    if args.json:
        print(dumps_json(report))
        return 0
    print(_summary_table(summary))
    if args.qrels:
        agreement = report["qrels"]
        print(f"\nagreement with {args.qrels} ({agreement['queries']} queries, "
              f"{agreement['judged_in_both']} documents judged in both)")
        print(format_table(["measure", "mean", "queries"],
                           [[k, v["mean"], v["queries"]] for k, v in agreement["mean"].items()], float_format="{:.3f}"))
    return 0


def run_from_live(args: argparse.Namespace) -> int:
    from steadyrank.retrieval.fsio import atomic_write_bytes
    from steadyrank.serve.server.quality.golden_sets import load_golden
    from steadyrank.serve.server.quality.judgment_store import read_records
    from steadyrank.serve.tools.golden.from_live import golden_from_live

    if args.min_judged < 1:
        raise ValueError(f"--min-judged must be >= 1, got {args.min_judged}")
    if not Path(args.store).is_file():
        raise FileNotFoundError(f"{args.store}: no judgments file")
    records = read_records(args.store)
    queries = golden_from_live(records, min_judged=args.min_judged)
    if not queries:
        raise ValueError(f"{args.store}: no judged /v1/search sample with at least {args.min_judged} judged documents")
    out = Path(args.golden_out)
    atomic_write_bytes(out, "".join(json.dumps(q, ensure_ascii=False, sort_keys=True) + "\n" for q in queries).encode())
    load_golden(out)  # the server reads it
    report = {"records": len(records), "queries": len(queries), "judgments": sum(len(q["judgments"]) for q in queries),
              "out": str(out)}
    if args.json:
        print(dumps_json(report))
    else:
        print(f"{report['queries']} golden queries ({report['judgments']} judgments) from {report['records']} "
              f"records -> {out}")
    return 0

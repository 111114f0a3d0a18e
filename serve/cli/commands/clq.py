"""``steadyrank clq sweep``: evaluate a grid of configurations and choose one (cost, latency, quality)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from steadyrank.retrieval.fsio import atomic_write_bytes
from steadyrank.serve.cli.options import add_corpus_arguments, add_grade_map_argument, load_corpus
from steadyrank.serve.output import dumps_json, format_table
from steadyrank.serve.server.quality.golden_sets import load_golden
from steadyrank.serve.tools.clq.grid import load_grid
from steadyrank.serve.tools.clq.plot import plot
from steadyrank.serve.tools.clq.report import decide, table_rows
from steadyrank.serve.tools.clq.sweep import Inputs, Sweep


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("clq", help="cost-latency-quality sweep over configurations")
    commands = parser.add_subparsers(dest="clq_command", metavar="ACTION", required=True)
    sweep = commands.add_parser(
        "sweep",
        help="run a grid (embedder × dimension × ANN × first stage × K policy × reranker) on a golden set",
        description=(
            "Build one index per embedder × dimension × ANN (corpus embedded once per embedder), retrieve "
            "every golden query, rerank with a per-regime score cache, and measure quality (tie-aware), "
            "latency (warm p50/p95) and cost per configuration. Writes OUT/results.json, OUT/clq.png and "
            "one OUT/configs/*.json per finished configuration; rerunning the same command reuses them."
        ),
    )
    sweep.add_argument("--grid", required=True, type=Path, metavar="GRID.yaml", help="the grid file")
    add_corpus_arguments(sweep)
    sweep.add_argument("--golden", required=True, metavar="GOLDEN",
                       help="golden set: JSONL file or BEIR folder (queries.jsonl + qrels/SPLIT.tsv)")
    sweep.add_argument("--split", default="test", help="qrels split of a BEIR golden folder (default %(default)s)")
    add_grade_map_argument(sweep, default=None,
                           help="map the golden grades onto the 1-5 rubric, e.g. 3:5,2:4,1:3,0:1 for TREC DL")
    sweep.add_argument("--out", required=True, type=Path, metavar="DIR", help="output and resume folder")
    sweep.add_argument("--cache", type=Path, default=None, metavar="DIR",
                       help="corpus-embedding and reranker-score cache (default OUT/cache); share it between sweeps")
    sweep.add_argument("--json", action="store_true", help="print the results as JSON instead of tables")
    sweep.set_defaults(func=run_sweep)


def run_sweep(args: argparse.Namespace) -> int:
    grid = load_grid(args.grid)
    golden = load_golden(args.golden, split=args.split, grade_map=args.grade_map)
    documents = load_corpus(args, args.corpus).documents
    args.out.mkdir(parents=True, exist_ok=True)
    sweep = Sweep(grid, Inputs.of(documents, golden), args.out, cache=args.cache)
    results = sweep.run()
    decision = decide(results, grid)
    document = {
        "grid": str(args.grid), "corpus": str(args.corpus), "golden": str(args.golden), "queries": len(golden),
        "quality_measure": grid.quality, "latency": f"total {grid.latency_stat}", "reused": sweep.reused,
        "load_average_at_end": list(os.getloadavg()), "results": results, **decision,
    }
    atomic_write_bytes(args.out / "results.json", (dumps_json(document) + "\n").encode())
    plot(decision, grid.quality, grid.latency_stat, args.out / "clq.png")
    if args.json:
        print(dumps_json(document))
        return 0
    headers, rows = table_rows(results, decision, grid)
    print(format_table(headers, rows))
    print()
    print(f"Pareto frontier ({len(decision['frontier'])} of {len(results)}): " + ", ".join(decision["frontier"]))
    print(f"best {grid.quality}: {decision['best']}")
    for kind, key, unit in (("sla_picks", "max_latency", "ms"), ("budget_picks", "max_cost", "")):
        for p in decision[kind]:
            noise = f"; within noise of the best: {len(p['within_noise_of_best'])}" if p["pick"] else ""
            print(f"{key} ≤ {p[key]:g}{unit}: pick {p['pick']} (best quality {p['best_quality']}, "
                  f"{p['feasible']} feasible{noise})")
    loads = [r["load_average"][0] for r in results if "load_average" in r]
    if loads:
        print(f"1-minute load average while timing: {min(loads):.2f}–{max(loads):.2f} "
              f"(machine cores: {os.cpu_count()}); compare latencies only at similar load")
    print(f"wrote {args.out / 'results.json'} and {args.out / 'clq.png'} ({sweep.reused} configurations reused)")
    return 0

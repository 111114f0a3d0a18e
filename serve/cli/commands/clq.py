"""``steadyrank clq sweep``: evaluate a grid of configurations and choose one (cost, latency, quality)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from steadyrank.retrieval.fsio import atomic_write_bytes
from steadyrank.serve.cli.commands.served import add_config_argument, served_run
from steadyrank.serve.cli.options import add_corpus_arguments, add_grade_map_argument, load_corpus
from steadyrank.serve.output import dumps_json, format_table
from steadyrank.serve.server.quality.golden_sets import load_golden
from steadyrank.serve.tools.clq.grid import Grid, load_grid
from steadyrank.serve.tools.clq.plot import plot
from steadyrank.serve.tools.clq.report import decide, marginal_rows, table_rows
from steadyrank.serve.tools.clq.sweep import Inputs, Sections, Sweep


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
            "one OUT/configs/*.json per finished configuration; rerunning the same command reuses them. "
            "Models resolve as served: each grid embedder's path and each reranker's path, precision and "
            "scoring are written over the --config settings' model sections (an unset field: as served)."
        ),
    )
    _add_grid_argument(sweep)
    add_config_argument(sweep)
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
    redo = commands.add_parser(
        "decide",
        help="re-decide a finished sweep under a grid's prices, bounds and quality targets (no data, no models)",
        description=(
            "Read a sweep's results.json, apply the grid's prices, bounds (sla_ms, budget, quality_target) "
            "and bootstrap settings to its stored per-configuration measurements, and print the same report "
            "as the sweep: frontier, picks, efficiency and the marginal ΔQ/Δms table. Nothing is re-measured; "
            "the grid's quality measure must be the sweep's."
        ),
    )
    _add_grid_argument(redo)
    redo.add_argument("--results", required=True, type=Path, metavar="RESULTS.json", help="a sweep's OUT/results.json")
    redo.add_argument("--out", type=Path, default=None, metavar="DIR",
                      help="also write DIR/results.json and DIR/clq.png (default: print only)")
    redo.add_argument("--json", action="store_true", help="print the results as JSON instead of tables")
    redo.set_defaults(func=run_decide)


def _add_grid_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--grid", required=True, type=Path, metavar="GRID.yaml", help="the grid file")


def run_sweep(args: argparse.Namespace) -> int:
    grid = load_grid(args.grid)
    golden = load_golden(args.golden, split=args.split, grade_map=args.grade_map)
    documents = load_corpus(args, args.corpus).documents
    served = served_run(argparse.Namespace(config=args.config))
    print(served.describe(), file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    sweep = Sweep(grid, Inputs.of(documents, golden), args.out, cache=args.cache,
                  sections=Sections(served.embedder, served.reranker or served.embedder, served.calibration))
    results = sweep.run()
    decision = decide(results, grid)
    document = {
        "grid": str(args.grid), "corpus": str(args.corpus), "golden": str(args.golden), "queries": len(golden),
        "settings": served.to_json(), "models": sweep.models(),
        "quality_measure": grid.quality, "latency": f"total {grid.latency_stat}", "reused": sweep.reused,
        "load_average_at_end": list(os.getloadavg()), "results": results, **decision,
    }
    write_report(document, grid, args.out)
    print_report(document, grid, as_json=args.json)
    if not args.json:
        print(f"wrote {args.out / 'results.json'} and {args.out / 'clq.png'} ({sweep.reused} configurations reused)")
    return 0


def run_decide(args: argparse.Namespace) -> int:
    grid = load_grid(args.grid)
    try:
        stored = json.loads(args.results.read_text(encoding="utf-8"))
        results = stored["results"]
        measure = stored["quality_measure"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{args.results}: not a sweep's results.json ({type(exc).__name__}: {exc})") from None
    if measure != grid.quality:
        raise ValueError(f"{args.results} measured quality as {measure!r} per query; the grid asks for "
                         f"{grid.quality!r}: rerun the sweep with that grid")
    document = {key: stored[key] for key in ("grid", "corpus", "golden", "queries", "load_average_at_end") if key in stored}
    document |= {"decided_from": str(args.results), "decision_grid": str(args.grid), "quality_measure": grid.quality,
                 "latency": f"total {grid.latency_stat}", "results": results, **decide(results, grid)}
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        write_report(document, grid, args.out)
    print_report(document, grid, as_json=args.json)
    return 0


def write_report(document: dict[str, Any], grid: Grid, out: Path) -> None:
    """``OUT/results.json`` (atomically) and ``OUT/clq.png``."""
    atomic_write_bytes(out / "results.json", (dumps_json(document) + "\n").encode())
    plot(document, grid.quality, grid.latency_stat, out / "clq.png")


def print_report(document: dict[str, Any], grid: Grid, *, as_json: bool) -> None:
    """The JSON document, or the tables and the picks."""
    if as_json:
        print(dumps_json(document))
        return
    results, decision = document["results"], document
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
    for p in decision["quality_target_picks"]:
        if p["pick"] is None:
            print(f"{grid.quality} ≥ {p['quality_target']:g}: no configuration reaches it")
            continue
        noise = " — within noise of the target" if p["target_within_noise"] else ""
        print(f"{grid.quality} ≥ {p['quality_target']:g}: pick {p['pick']} ({p['quality']:.4f} "
              f"[{p['ci_low']:.4f}, {p['ci_high']:.4f}]{noise}; {p['latency_ms']:.1f} ms, "
              f"{p['cost_per_query']:.6f}/query; {p['feasible']} reach it)")
    print(f"eff local / eff e2e ({grid.quality} per second of median rerank / total latency): "
          f"{decision['efficiency_note']}")
    print()
    print("Marginal ΔQ/Δms along the frontier (latency–quality staircase, quality per ms):")
    print(format_table(*marginal_rows(decision)))
    loads = [r["load_average"][0] for r in results if "load_average" in r]
    if loads:
        print(f"1-minute load average while timing: {min(loads):.2f}–{max(loads):.2f} "
              f"(machine cores: {os.cpu_count()}); compare latencies only at similar load")

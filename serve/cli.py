"""The `steadyrank` command line: one subcommand per module listed in COMMANDS.

Each command module exposes ``register(subparsers)`` which adds its parser and sets
``func`` (called with the parsed namespace, returning the exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: Subcommand → (module, one-line summary). Only the module of the command being run is imported,
#: so ``steadyrank evaluate`` never pays for torch or Ray.
COMMANDS: dict[str, tuple[str, str]] = {
    "evaluate": ("steadyrank.serve.commands.evaluate", "tie-aware evaluation of a TREC run (E, min, max, range, bias, PROC)"),
    "index": ("steadyrank.serve.commands.index", "build and maintain a FAISS + BM25 index directory"),
    "search": ("steadyrank.serve.commands.search", "retrieve and rerank queries against an index; write a TREC run"),
    "route": ("steadyrank.serve.commands.route", "dynamic-K routing: calibrate thresholds on a golden set"),
    "precision-report": ("steadyrank.serve.commands.precision_report", "FP32/BF16/FP16 with and without HPS: ties and metric ranges"),
    "serve": ("steadyrank.serve.commands.serve", "start the HTTP server (Ray Serve) on the embedded default or a settings file"),
    "canary": ("steadyrank.serve.commands.canary", "canary comparison of a running steadyrank server"),
    "golden": ("steadyrank.serve.commands.golden", "build a golden set (pool, judge, prune, Plackett-Luce refinement); audit it"),
    "clq": ("steadyrank.serve.commands.clq", "cost-latency-quality sweep: Pareto frontier and SLA/budget picks"),
    "probe": ("steadyrank.serve.commands.probe", "Δ-margin name-identity probes and conversational-noise probes"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with ``command`` fully registered and the other subcommands only listed."""
    parser = argparse.ArgumentParser(
        prog="steadyrank",
        description="Trustworthy low-precision reranking: tie-aware evaluation, HPS scoring, serving.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module, summary) in COMMANDS.items():
        if name == command:
            importlib.import_module(module).register(subparsers)
        else:
            subparsers.add_parser(name, help=summary)
    return parser


def _command_in(argv: list[str]) -> str | None:
    first = next((a for a in argv if not a.startswith("-")), None)
    return first if first in COMMANDS else None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(_command_in(argv)).parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, PermissionError) as exc:  # user-facing: one line, exit 2
        print(f"steadyrank {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"steadyrank {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

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
    "evaluate": ("steadyrank.serve.cli.commands.evaluate", "tie-aware evaluation of a TREC run (E, min, max, range, bias, PROC)"),
    "index": ("steadyrank.serve.cli.commands.index", "build and maintain a FAISS + BM25 index directory"),
    "search": ("steadyrank.serve.cli.commands.search", "retrieve and rerank queries against an index; write a TREC run"),
    "route": ("steadyrank.serve.cli.commands.route", "dynamic-K routing: calibrate thresholds on a golden set"),
    "precision-report": ("steadyrank.serve.cli.commands.precision_report",
                         "FP32/BF16/FP16 with and without HPS: ties and metric ranges"),
    "serve": ("steadyrank.serve.cli.commands.serve", "start the HTTP server (Ray Serve) on the embedded default or a settings file"),
    "models": ("steadyrank.serve.cli.commands.models", "download Hub models into the local cache ahead of time"),
    "canary": ("steadyrank.serve.cli.commands.canary", "canary comparison of a running steadyrank server"),
    "golden": ("steadyrank.serve.cli.commands.golden", "build a golden set (pool, judge, prune, Plackett-Luce refinement); audit it"),
    "clq": ("steadyrank.serve.cli.commands.clq", "cost-latency-quality sweep: Pareto frontier and SLA/budget picks"),
    "probe": ("steadyrank.serve.cli.commands.probe", "Δ-margin name-identity probes and conversational-noise probes"),
    "calibrate": ("steadyrank.serve.cli.commands.calibrate",
                  "fit calibrated scores (P(relevant) from a reranker's rank key) on a golden set"),
}


def _version() -> str:
    """The installed distribution's version (``unknown`` when run from a tree that was never installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("steadyrank")
    except PackageNotFoundError:
        return "unknown"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with ``command`` fully registered and the other subcommands only listed."""
    parser = argparse.ArgumentParser(
        prog="steadyrank",
        description="Trustworthy low-precision reranking: tie-aware evaluation, HPS scoring, serving.",
    )
    parser.add_argument("--version", action="version", version=f"steadyrank {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module, summary) in COMMANDS.items():
        if name == command:
            importlib.import_module(module).register(subparsers)
        else:
            subparsers.add_parser(name, help=summary)
    return parser


def _chosen_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost (sub)parser ``args`` went through, e.g. ``index build``'s for ``index build …``."""
    while True:
        subparsers = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        name: str | None = None if subparsers is None else getattr(args, subparsers.dest, None)
        chosen = None if subparsers is None or name is None else subparsers.choices.get(name)
        if chosen is None:
            return parser
        parser = chosen


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse ``argv``; an unknown argument or a missing required flag exits with the usage of the
    subcommand it was given to (argparse alone reports unknown ones with the top-level usage)."""
    from steadyrank.serve.cli.options import missing_required

    parser = build_parser(_command_in(argv))
    args, unknown = parser.parse_known_args(argv)
    chosen = _chosen_parser(parser, args)
    if unknown:
        chosen.error(f"unrecognized arguments: {' '.join(unknown)}")
    missing = missing_required(args)
    if missing:
        chosen.error(f"the following arguments are required: {', '.join(missing)}")
    return args


def _command_in(argv: list[str]) -> str | None:
    first = next((a for a in argv if not a.startswith("-")), None)
    return first if first in COMMANDS else None


#: Top-level modules an extra other than ``server`` provides (``pip install 'steadyrank[<extra>]'``).
_EXTRA_OF_MODULE = {"openai": "golden", "vllm": "vllm"}


def _missing_extra(command: str, exc: ModuleNotFoundError) -> int:
    """Say which extra to install when a command needs a module the installed extras lack (exit 2);
    a module of steadyrank itself missing is a bug and is raised."""
    top = (exc.name or "").split(".")[0]
    if not top or top == "steadyrank":
        raise exc
    extra = _EXTRA_OF_MODULE.get(top, "server")
    print(f"steadyrank {command}: needs the '{extra}' extra (module {top!r} is not installed): "
          f"pip install 'steadyrank[{extra}]'", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = _command_in(argv)
    try:
        args = parse(argv)
        return int(args.func(args) or 0)
    except ModuleNotFoundError as exc:
        return _missing_extra(command or "", exc)
    except (ValueError, FileNotFoundError, PermissionError) as exc:  # user-facing: one line, exit 2
        print(f"steadyrank {command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"steadyrank {command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

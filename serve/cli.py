"""The `steadyrank` command line: one subcommand per module listed in COMMAND_MODULES.

Each command module exposes ``register(subparsers)`` which adds its parser and sets
``func`` (called with the parsed namespace, returning the exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMAND_MODULES = [
    "serve.commands.evaluate",
]


class CliError(Exception):
    """A user-facing error: printed as one line on stderr, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="steadyrank",
        description="Trustworthy low-precision reranking: tie-aware evaluation, HPS scoring, serving.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (CliError, ValueError, FileNotFoundError, PermissionError) as exc:
        print(f"steadyrank {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"steadyrank {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

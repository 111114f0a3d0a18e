"""Shared benchmark output: one JSON object on stdout, then a plain table (to stderr with --json)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from steadyrank.serve.output import dumps_json, format_table


def timed(function: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """Best wall time in seconds over ``repeat`` runs, and the last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def emit(payload: dict, headers: Sequence[str], rows: Sequence[Sequence[Any]], *, json_only: bool) -> None:
    """Print the JSON payload, then the table (the table goes to stderr when ``json_only``)."""
    print(dumps_json(payload))
    print(format_table(headers, rows, float_format="{:.3f}"), file=sys.stderr if json_only else sys.stdout)


def run_facts() -> dict[str, Any]:
    """Provenance of a benchmark run, taken at its start: git commit (``+dirty`` with uncommitted
    changes), argv, UTC date and the 1/5/15-minute load averages (``load_average_before``)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, check=False)
        return done.stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    return {"commit": commit, "argv": sys.argv, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load_average_before": list(os.getloadavg())}

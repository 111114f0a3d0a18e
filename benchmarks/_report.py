"""Shared benchmark output: one JSON object on stdout, then a plain table (to stderr with --json)."""

from __future__ import annotations

import datetime
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


def provenance(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Where a result came from: ``commit`` (HEAD, ``-dirty`` with uncommitted changes), ``argv``,
    ``date`` (UTC, ISO 8601) and ``load_average`` (1, 5, 15 min) when it was taken."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=False).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    return {"commit": commit, "argv": list(sys.argv if argv is None else argv),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "load_average": list(os.getloadavg())}

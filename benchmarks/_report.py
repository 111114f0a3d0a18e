"""Shared benchmark output: one JSON object on stdout, then a plain table (to stderr with --json)."""

from __future__ import annotations

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

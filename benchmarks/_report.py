"""Shared benchmark output: one JSON object on stdout, then a plain table (to stderr with --json);
every result carries its provenance (commit, argv, date, machine, load average), written here.

``emit`` and ``write_json`` add a ``provenance`` object to the payload they print or write, so a
result file under ``benchmarks/results/`` says by itself which code, command and machine made it.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from steadyrank.serve.output import dumps_json, format_table

REPO = Path(__file__).resolve().parents[1]
#: When the benchmark process started (its provenance's load average at start is read then).
_STARTED = (datetime.now(timezone.utc), os.getloadavg())


def timed(function: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """Best wall time in seconds over ``repeat`` runs, and the last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def git(*args: str, repo: Path = REPO) -> str | None:
    """``git -C repo ARGS``'s output, stripped (None when git fails or is missing)."""
    try:
        out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


#: the CPU flags that decide which precision is fastest (BF16, int8 and FP32 vector units)
VECTOR_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8")


def _vector_flags() -> list[str]:
    """Which of :data:`VECTOR_FLAGS` this CPU has (``/proc/cpuinfo``)."""
    from steadyrank.serve.runtime.precision import cpu_flags

    have = cpu_flags()
    return [flag for flag in VECTOR_FLAGS if flag in have]


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)  # kB → GiB
    except OSError:
        pass
    return None


def _gpus() -> list[str]:
    """GPU names from ``nvidia-smi`` (empty without one); torch is not imported for this."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def provenance() -> dict[str, Any]:
    """Which code, command and machine produced a result, and how busy the machine was.

    ``commit`` is ``git rev-parse HEAD`` (``dirty`` true when tracked files differ from it);
    ``loadavg_start``/``loadavg_end`` are the 1/5/15-minute load averages when the process started
    and now (compare timings only between runs at similar load: benchmarks/README.md "Method").
    """
    started, load_start = _STARTED
    status = git("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": git("rev-parse", "HEAD"),
        "dirty": None if status is None else bool(status),
        "argv": [Path(sys.argv[0]).as_posix(), *sys.argv[1:]] if sys.argv else [],
        "started": started.isoformat(timespec="seconds"),
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "cpu": _cpu_model(),
            "cpu_flags": _vector_flags(),
            "logical_cpus": os.cpu_count(),
            "memory_gib": _memory_gib(),
            "gpus": _gpus(),
            "system": f"{platform.system()} {platform.release()}",
            "python": platform.python_version(),
        },
        "loadavg_start": [round(x, 2) for x in load_start],
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
    }


def with_provenance(payload: dict) -> dict:
    """``payload`` with a ``provenance`` object (kept when the payload already has one)."""
    return payload if "provenance" in payload else {**payload, "provenance": provenance()}


def write_json(path: str | Path, payload: dict) -> dict:
    """Write ``payload`` with its provenance as indented JSON to ``path``; returns what was written."""
    payload = with_provenance(payload)
    Path(path).write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    return payload


def emit(payload: dict, headers: Sequence[str], rows: Sequence[Sequence[Any]], *, json_only: bool) -> None:
    """Print the JSON payload with its provenance, then the table (to stderr when ``json_only``)."""
    print(dumps_json(with_provenance(payload)))
    print(format_table(headers, rows, float_format="{:.3f}"), file=sys.stderr if json_only else sys.stdout)

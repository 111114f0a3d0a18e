"""The load column of benchmarks/README.md's "Current results" table, filled from the result files.

Every row of that table names its result files (`` `results/NAME.json` ``) in its last column; the
``load 1m`` column shows, per file, the 1-minute load average the file recorded:

- ``start → end``: ``provenance.loadavg_start[0]`` → ``provenance.loadavg_end[0]`` (written by
  ``benchmarks/_report.py``), or for runs older than it the script's own fields
  (``load_average_start`` → ``load_average`` of bench_shards, ``load_average_at_end`` of the CLQ
  sweep, ``setup.load_average`` of bench_retrieval, all taken at the end; a missing start or end
  is ``—``);
- ``max M``: the highest 1-minute load average any measured row saw (``loadavg_1m_max`` of
  bench_peers' rows, sampled while the servers ran);
- ``not recorded``: the file holds no load average (GPU runs restored from an older README).

A row naming several files shows each as ``NAME: …`` joined by ``; ``. Run::

    python benchmarks/results_table.py --write   # rewrite the column in benchmarks/README.md
    python benchmarks/results_table.py --check   # exit 1 when the column is stale
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
README = BENCHMARKS / "README.md"
COMMAND = "python benchmarks/results_table.py --write"
SECTION = "## Current results"
LOAD_HEADER = "load 1m"
_CELL_SPLIT = re.compile(r"(?<!\\)\|")  # a table cell boundary (an escaped \| stays inside a cell)
_RESULT_FILE = re.compile(r"`(results/[^`]+\.json)`")


def _first(values: Any) -> float | None:
    """The 1-minute figure of a ``[1m, 5m, 15m]`` load average (None when absent)."""
    return float(values[0]) if isinstance(values, list) and values else None


def _rows_max(payload: dict[str, Any]) -> float | None:
    """The highest ``loadavg_1m_max`` of any row of any peer (bench_peers), None without one."""
    peers = payload.get("peers")
    if not isinstance(peers, dict):
        return None
    seen = [row["loadavg_1m_max"] for peer in peers.values() if isinstance(peer, dict)
            for row in (peer.get("rows") or {}).values()
            if isinstance(row, dict) and isinstance(row.get("loadavg_1m_max"), int | float)]
    return max(seen) if seen else None


def load_text(payload: dict[str, Any]) -> str:
    """What the ``load 1m`` column says of one result file's JSON (rules in the module docstring)."""
    provenance = payload.get("provenance") or {}
    start = _first(provenance.get("loadavg_start"))
    end = _first(provenance.get("loadavg_end"))
    if start is None and end is None:
        start = _first(payload.get("load_average_start"))
        setup = payload.get("setup") or {}
        end = _first(payload.get("load_average") or payload.get("load_average_at_end") or setup.get("load_average"))
    parts = []
    if start is not None or end is not None:
        parts.append(" → ".join("—" if x is None else f"{x:.2f}" for x in (start, end)))
    peak = _rows_max(payload)
    if peak is not None:
        parts.append(f"max {peak:.2f}")
    return ", ".join(parts) or "not recorded"


def cell_for(files: list[str], root: Path) -> str:
    """The column's cell for a row naming ``files`` (paths relative to ``root``, the benchmarks folder)."""
    if not files:
        raise ValueError("a results row names no `results/*.json` file")
    texts = [load_text(json.loads((root / name).read_text(encoding="utf-8"))) for name in files]
    if len(texts) == 1:
        return texts[0]
    return "; ".join(f"{Path(name).stem}: {text}" for name, text in zip(files, texts, strict=True))


def _split(line: str) -> list[str]:
    return [cell.strip() for cell in _CELL_SPLIT.split(line.strip())[1:-1]]


def _table_lines(lines: list[str]) -> Iterator[int]:
    """Indices of the data rows of the first table after :data:`SECTION`; the header row's first."""
    start = lines.index(SECTION)
    i = next(i for i in range(start, len(lines)) if lines[i].startswith("|"))
    while i < len(lines) and lines[i].startswith("|"):
        yield i
        i += 1


def render(text: str, root: Path = BENCHMARKS) -> str:
    """``text`` (the README) with the ``load 1m`` cells of the results table recomputed."""
    lines = text.split("\n")
    indices = list(_table_lines(lines))
    header = _split(lines[indices[0]])
    if LOAD_HEADER not in header:
        raise ValueError(f"the table under {SECTION!r} has no {LOAD_HEADER!r} column")
    column = header.index(LOAD_HEADER)
    for i in indices[2:]:  # past the header and its |---| line
        cells = _split(lines[i])
        cells[column] = cell_for(_RESULT_FILE.findall(cells[-1]), root)
        lines[i] = "| " + " | ".join(cells) + " |"
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="rewrite the load column of benchmarks/README.md")
    action.add_argument("--check", action="store_true", help="exit 1 when the load column is stale")
    args = parser.parse_args(argv)
    current = README.read_text(encoding="utf-8")
    expected = render(current, README.parent)
    if args.write:
        README.write_text(expected, encoding="utf-8")
        return 0
    if current != expected:
        print(f"stale: the load column of benchmarks/README.md; run `{COMMAND}`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

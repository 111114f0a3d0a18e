"""Output helpers shared by every serve layer: strict JSON (NaN → null) and plain-text tables."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def json_safe(value: Any) -> Any:
    """``value`` with every NaN/inf float (at any depth of dicts, lists, tuples) replaced by None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def dumps_json(payload: Any) -> str:
    """JSON text with NaN/inf written as null, so every consumer can parse it."""
    return json.dumps(json_safe(payload), indent=2, allow_nan=False)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], float_format: str = "{:.4f}") -> str:
    """A left-aligned first column and right-aligned others; floats via ``float_format``, NaN as 'NA'."""

    def cell(value: Any) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "NA"
        if isinstance(value, float):
            return float_format.format(value)
        return str(value)

    table = [list(headers)] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(headers))]
    lines = []
    for j, row in enumerate(table):
        parts = [row[0].ljust(widths[0])] + [v.rjust(w) for v, w in zip(row[1:], widths[1:], strict=False)]
        lines.append("  ".join(parts).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def save_png(fig: Any, path: Path) -> None:
    """Write a matplotlib figure as a PNG (120 dpi) atomically (a temporary file beside ``path``,
    renamed over it) and close it."""
    import matplotlib.pyplot as plt

    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
    tmp.replace(path)

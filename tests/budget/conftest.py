"""The resource-budget table: every row measured in the session (tests/budget/harness.py), printed
at its end; the generated shapes of one route are summed up in one row (their worst)."""

from __future__ import annotations

from typing import Any

from tests.budget.harness import HEADER, ROWS, Measured

GENERATED = "generated: "


def table(rows: list[Measured]) -> str:
    """The rows as a Markdown table; rows of generated shapes folded into one row per route."""
    lines, generated = [HEADER], {}
    for row in rows:
        if row.body.startswith(GENERATED):
            generated.setdefault(row.route, []).append(row)
        else:
            lines.append(row.row())
    for route, group in generated.items():
        statuses = "/".join(str(s) for s in sorted({r.status for r in group}))
        worst = Measured(route, f"{len(group)} generated shapes (worst)", max(r.size for r in group), 0,
                         max(r.seconds for r in group), max(r.peak_mib for r in group),
                         max(r.healthz_ms for r in group), max(r.stall_ms for r in group), None)
        lines.append(worst.row().replace("| 0 |", f"| {statuses} |", 1))
    return "\n".join(lines)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if ROWS:
        terminalreporter.section("resource budget (tests/budget)")
        terminalreporter.write_line(table(ROWS))

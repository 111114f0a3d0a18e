"""The generated reference pages (docs/reference/*.md) are what their sources render now.

No Ray and no model: the pages come from the pydantic settings, the telemetry catalogue and the
argparse parsers (``steadyrank.serve.cli.reference``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from steadyrank.serve.cli import reference
from steadyrank.serve.settings import Settings
from steadyrank.serve.telemetry import CATALOGUE


@pytest.mark.parametrize("name", sorted(reference.PAGES))
def test_committed_page_is_current(name: str) -> None:
    path = reference.REFERENCE_DIR / name
    assert path.is_file(), f"docs/reference/{name} is missing; run `{reference.COMMAND}`"
    assert path.read_text(encoding="utf-8") == reference.PAGES[name](), (
        f"docs/reference/{name} is stale; run `{reference.COMMAND}` and commit the result")


def test_a_changed_source_makes_its_page_stale(tmp_path: Path) -> None:
    reference.write_pages(tmp_path)
    assert reference.stale_pages(tmp_path) == []
    (tmp_path / "metrics.md").write_text("old\n", encoding="utf-8")
    (tmp_path / "cli.md").unlink()
    assert reference.stale_pages(tmp_path) == ["metrics.md", "cli.md"]


def test_check_command_names_the_stale_page_and_the_fix(tmp_path: Path, monkeypatch, capsys) -> None:
    reference.write_pages(tmp_path)
    (tmp_path / "settings.md").write_text("old\n", encoding="utf-8")
    monkeypatch.setattr(reference, "REFERENCE_DIR", tmp_path)
    assert reference.main(["--check"]) == 1
    assert f"stale: docs/reference/settings.md; run `{reference.COMMAND}`" in capsys.readouterr().err


def _leaf_paths(model, prefix: str = "") -> set[str]:
    """Dotted paths of every leaf field of the default settings, as the page's tables show them."""
    out = set()
    for name in type(model).model_fields:
        value = getattr(model, name)
        if hasattr(type(value), "model_fields"):
            out |= _leaf_paths(value, f"{prefix}{name}.")
        else:
            out.add(f"{prefix}{name}")
    return out


def test_settings_page_lists_every_field_with_its_default() -> None:
    page = reference.settings_page()
    sections: dict[str, set[str]] = {}
    current = ""
    for line in page.splitlines():
        if line.startswith("## "):
            current = line[3:].strip("`") if line != "## top level" else ""
        elif line.startswith("| `"):
            sections.setdefault(current, set()).add(line.split("`")[1])
    shown = {f"{section}.{field}" if section else field for section, fields in sections.items() for field in fields}
    assert _leaf_paths(Settings()) <= shown


def test_metrics_page_lists_every_catalogue_metric() -> None:
    page = reference.metrics_page()
    for spec in CATALOGUE.values():
        row = next(line for line in page.splitlines() if line.startswith(f"| `{spec.name}` |"))
        assert f"| {spec.kind} |" in row


def test_cli_page_has_every_subcommand_and_its_flags() -> None:
    page = reference.cli_page()
    for command in ("evaluate", "index", "search", "route", "precision-report", "serve", "canary", "golden", "clq"):
        assert f"## `steadyrank {command}`" in page
    assert "### `steadyrank index build`" in page
    assert "--rel-level" in page and "--config" in page


def test_http_page_has_every_route_of_the_served_schema_and_its_request_fields() -> None:
    page = reference.http_page()
    paths = reference.served_openapi(Settings())["paths"]
    assert {"/v1/rerank", "/v2/rerank", "/v1/search", "/v1/embeddings", "/readyz"} <= set(paths)
    for path, operations in paths.items():
        for method in operations:
            assert f"## `{method.upper()} {path}`" in page
    assert "| `documents` | array of string \\| object | yes |" in page

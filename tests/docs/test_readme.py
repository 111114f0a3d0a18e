"""README.md is a front door: short, every relative link resolves, no path outside the repository.

The same no-outside-path rule holds for the docs site and the benchmark notes, which a user reads
from a clone of the repository alone.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
#: Paths that exist only in a development workspace, never in a user's clone.
OUTSIDE = re.compile(r"\.\./shared|/work/|\.\./\.\./")


def _user_docs() -> list[Path]:
    return [REPO / "README.md", REPO / "CHANGELOG.md", REPO / "benchmarks" / "README.md",
            *sorted((REPO / "docs").rglob("*.md"))]


def test_readme_is_at_most_250_lines() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail into docs/"


@pytest.mark.parametrize("name", ["README.md", "benchmarks/README.md", "CHANGELOG.md"])
def test_relative_links_resolve(name: str) -> None:
    page = REPO / name
    missing = [target for target in LINK.findall(page.read_text(encoding="utf-8"))
               if not target.startswith(("http://", "https://", "mailto:")) and not (page.parent / target).exists()]
    assert missing == [], f"{name} links to missing files: {missing}"


def test_no_document_names_a_path_outside_the_repository() -> None:
    found = [f"{path.relative_to(REPO)}:{n}: {line.strip()}"
             for path in _user_docs()
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if OUTSIDE.search(line)]
    assert found == []


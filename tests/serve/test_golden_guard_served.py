"""The own-corpus guard at ``steadyrank serve``: a user index with the demo golden set named as
``quality.golden`` (most of whose judged documents it lacks) is refused before Ray starts, with one
line naming the golden set, the count of missing ids and a sample; the same index with no golden
set passes ``serve --check`` with the evaluator off. The ``serve`` process itself runs (it refuses
before starting Ray; run under the heavy lock in case it does not). The index is built with the
hashing embedder (the guard reads document ids only)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from steadyrank.retrieval.corpus import read_documents
from steadyrank.retrieval.store import build_index
from tests.retrieval.helpers import HashEmbedder

pytestmark = pytest.mark.e2e  # runs steadyrank serve --check in a subprocess

DEMO = Path(__file__).resolve().parents[2] / "serve" / "data" / "demo"


@pytest.fixture(scope="module")
def own_index(tmp_path_factory) -> Path:
    """An index of the demo corpus's last 150 documents: "your own corpus"."""
    path = tmp_path_factory.mktemp("own-corpus") / "index"
    build_index(path, read_documents(DEMO)[150:], HashEmbedder())
    return path


def _serve(config: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "steadyrank.serve.cli", "serve", "--config", str(config), *extra],
                          capture_output=True, text=True, timeout=300)


def test_serve_refuses_a_golden_set_judging_other_documents(own_index: Path, tmp_path: Path) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text(yaml.safe_dump({"cache_dir": str(tmp_path / "cache"), "index": {"path": str(own_index)},
                                      "quality": {"golden": str(DEMO / "golden.jsonl")}}), encoding="utf-8")
    done = _serve(config)
    assert done.returncode == 2, done.stderr[-2000:]
    refusal = done.stderr.strip().splitlines()[-1]
    assert refusal.startswith("steadyrank serve: error: quality.golden: ")
    assert f"document ids judged by the golden set {DEMO / 'golden.jsonl'} are not in the index {own_index}" in refusal
    assert "(e.g. 'd001', " in refusal
    assert "starting the deployments" not in done.stderr  # refused before Ray


def test_serve_check_without_golden_keeps_the_evaluator_off(own_index: Path, tmp_path: Path) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text(yaml.safe_dump({"cache_dir": str(tmp_path / "cache"), "index": {"path": str(own_index)}}),
                      encoding="utf-8")
    done = _serve(config, "--check")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "the shadow evaluator is off: the index is your own corpus and quality.golden is unset" in done.stderr
    assert "settings valid" in done.stdout

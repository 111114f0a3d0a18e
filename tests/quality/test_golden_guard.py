"""The own-corpus guard (serve/server/golden_guard.py) on real indexes and settings, no Ray: a user
index without a golden set switches the evaluator off; a golden set judging ids the index lacks
is refused with its name, the count of missing ids and a sample."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from steadyrank.retrieval.corpus import read_documents
from steadyrank.retrieval.store import build_index
from steadyrank.serve.server.golden_guard import (
    GoldenCoverageError,
    apply_guard,
    check_golden_coverage,
    missing_judged_ids,
)
from steadyrank.serve.server.hosting.builder import resolve_settings
from steadyrank.serve.server.quality.golden_sets import load_golden
from steadyrank.serve.settings import load_settings
from tests.retrieval.helpers import HashEmbedder

DEMO = Path(__file__).resolve().parents[2] / "serve" / "data" / "demo"


def judged_ids() -> list[str]:
    golden = load_golden()
    return list(dict.fromkeys(d for q in golden.queries.values() for d in q.judgments))


@pytest.fixture(scope="module")
def half_index(tmp_path_factory) -> Path:
    """The demo corpus without its first 150 documents, as a real index (hashing embedder)."""
    path = tmp_path_factory.mktemp("guard") / "index"
    build_index(path, read_documents(DEMO)[150:], HashEmbedder())
    return path


def test_the_demo_golden_set_judges_only_demo_documents() -> None:
    ids = {d.id for d in read_documents(DEMO)}
    judged, missing = missing_judged_ids(load_golden(), ids.__contains__)
    assert judged == len(judged_ids()) > 100 and missing == []


def test_user_index_without_golden_turns_the_evaluator_off(tmp_path: Path, half_index: Path) -> None:
    assert apply_guard(load_settings()).quality.enabled  # the embedded default keeps the demo golden set
    # the demo corpus named explicitly is still the corpus the demo golden set judges
    assert apply_guard(load_settings({"index": {"corpus": str(DEMO / "corpus.jsonl")}})).quality.enabled
    own = tmp_path / "own.jsonl"
    own.write_bytes((DEMO / "corpus.jsonl").read_bytes())
    for index in ({"path": str(half_index)}, {"corpus": str(own)}):
        settings = apply_guard(load_settings({"index": index}))
        assert settings.quality.enabled is False
    with_golden = load_settings({"index": {"path": str(half_index)}, "quality": {"golden": str(DEMO / "golden.jsonl")}})
    assert apply_guard(with_golden).quality.enabled
    config = tmp_path / "settings.yaml"
    config.write_text(f"index: {{path: {half_index}}}\n", encoding="utf-8")
    assert resolve_settings(config).quality.enabled is False  # what build_app and `steadyrank serve` load


def test_golden_set_with_ids_missing_from_the_index_is_refused(half_index: Path) -> None:
    settings = load_settings({"index": {"path": str(half_index)}, "quality": {"golden": str(DEMO / "golden.jsonl")}})
    first_index = {d.id for d in read_documents(DEMO)[150:]}
    missing = [d for d in judged_ids() if d not in first_index]
    with pytest.raises(GoldenCoverageError) as info:
        check_golden_coverage(settings, half_index)
    message = str(info.value)
    assert message.startswith(f"quality.golden: {len(missing)} of the {len(judged_ids())} document ids judged by "
                              f"the golden set {DEMO / 'golden.jsonl'} are not in the index {half_index} "
                              f"(e.g. {', '.join(repr(d) for d in missing[:5])}, …)")
    assert "steadyrank golden build --index" in message


def test_golden_set_judged_on_the_index_passes(tmp_path: Path, half_index: Path) -> None:
    kept = {d.id for d in read_documents(DEMO)[150:]}
    lines = []
    for line in (DEMO / "golden.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        record["judgments"] = {d: g for d, g in record["judgments"].items() if d in kept}
        if record["judgments"]:
            lines.append(json.dumps(record))
    golden = tmp_path / "golden.jsonl"
    golden.write_text("\n".join(lines) + "\n", encoding="utf-8")
    check_golden_coverage(load_settings({"index": {"path": str(half_index)}, "quality": {"golden": str(golden)}}),
                          half_index)
    off = load_settings({"index": {"path": str(half_index)}, "quality": {"golden": str(DEMO / "golden.jsonl"),
                                                                         "enabled": False}})
    check_golden_coverage(off, half_index)  # the evaluator is off: nothing to guard

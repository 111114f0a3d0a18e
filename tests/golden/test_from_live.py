"""``steadyrank golden from-live``: live judged samples become golden-set queries in the server's format."""

from __future__ import annotations

import json

from steadyrank.serve.cli.main import main
from steadyrank.serve.server.quality.golden_sets import load_golden
from steadyrank.serve.server.quality.judgment_store import JudgmentStore
from steadyrank.serve.tools.golden.from_live import live_query_id


def test_judged_searches_become_golden_queries_and_the_rest_is_skipped(tmp_path, capsys) -> None:
    store = JudgmentStore(tmp_path / "judged.jsonl")
    store.open()
    day = {"day": "2026-11-27", "judge_calls": 2, "tokens": 10}
    store.append({**day, "status": "judged", "route": "search", "query": "Restart a unit?", "grades": {"d1": 5, "d2": 1}})
    store.append({**day, "status": "judged", "route": "search", "query": "restart a unit", "grades": {"d2": 2, "d3": 4}})
    store.append({**day, "status": "judged", "route": "search", "query": "list ports", "grades": {"d4": 3}})
    store.append({**day, "status": "judged", "route": "rerank", "query": "other", "grades": {"sha256:ab": 5}})
    store.append({**day, "status": "failed", "route": "search", "query": "broken", "error": "JudgeError"})
    with (tmp_path / "judged.jsonl").open("ab") as handle:
        handle.write(b'{"day": "2026-11-27", "status": "jud')  # a torn last line is tolerated
    out = tmp_path / "golden.jsonl"
    assert main(["golden", "from-live", str(tmp_path / "judged.jsonl"), "--golden-out", str(out), "--min-judged", "2",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report == {"records": 5, "queries": 1, "judgments": 3, "out": str(out)}
    golden = load_golden(out)  # the server's own loader reads it
    query = golden.queries[live_query_id("restart a unit")]
    assert query.query == "restart a unit" and query.judgments == {"d1": 5, "d2": 2, "d3": 4}  # later grades win


def test_nothing_to_convert_is_a_clear_error(tmp_path, capsys) -> None:
    (tmp_path / "judged.jsonl").write_text("")
    assert main(["golden", "from-live", str(tmp_path / "judged.jsonl"), "--golden-out", str(tmp_path / "g.jsonl")]) != 0
    assert "no judged /v1/search sample with at least 3 judged documents" in capsys.readouterr().err
    assert not (tmp_path / "g.jsonl").exists()

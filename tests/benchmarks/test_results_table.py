"""The ``load 1m`` column of benchmarks/README.md's results table is what the result files record
(``benchmarks/results_table.py``); no model, no server."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import results_table

_TABLE = """# Benchmarks

## Current results

| benchmark | headline | load 1m | result |
|---|---|---|---|
| new run | fast | stale | `results/new.json` |
| peers | 1.2\\|1.3× | | `results/peers.json`, `results/old.json` |

## History
"""


def _write(root: Path, name: str, payload: dict) -> None:
    (root / "results").mkdir(exist_ok=True)
    (root / "results" / name).write_text(json.dumps(payload), encoding="utf-8")


def test_committed_readme_column_is_current() -> None:
    readme = results_table.README.read_text(encoding="utf-8")
    assert readme == results_table.render(readme), f"stale load column; run `{results_table.COMMAND}`"


def test_every_results_row_names_a_file_and_shows_a_load() -> None:
    lines = results_table.README.read_text(encoding="utf-8").split("\n")
    indices = list(results_table._table_lines(lines))
    header = results_table._split(lines[indices[0]])
    column = header.index(results_table.LOAD_HEADER)
    rows = [results_table._split(lines[i]) for i in indices[2:]]
    assert rows
    for cells in rows:
        assert results_table._RESULT_FILE.findall(cells[-1]), cells[0]
        assert cells[column], cells[0]


def test_load_text_from_provenance_legacy_fields_and_peer_rows() -> None:
    provenance = {"provenance": {"loadavg_start": [1.234, 2, 3], "loadavg_end": [0.5, 1, 1]}}
    assert results_table.load_text(provenance) == "1.23 → 0.50"
    assert results_table.load_text({"load_average_start": [0.08, 1, 2], "load_average": [3.36, 2, 2]}) == "0.08 → 3.36"
    assert results_table.load_text({"load_average_at_end": [0.52, 1, 2]}) == "— → 0.52"
    assert results_table.load_text({"setup": {"load_average": [12.76, 1, 1]}}) == "— → 12.76"
    peers = {"peers": {"a": {"rows": {"r/c1": {"loadavg_1m_max": 1.5}, "r/c8": {"loadavg_1m_max": 4.1}}},
                       "b": {"rows": {"r/c1": {"loadavg_1m_max": 2.0}}}}}
    assert results_table.load_text(peers) == "max 4.10"
    assert results_table.load_text({**peers, **provenance}) == "1.23 → 0.50, max 4.10"
    assert results_table.load_text({"provenance": {"reconstructed": "from a README"}}) == "not recorded"


def test_render_fills_each_row_from_its_files(tmp_path: Path) -> None:
    _write(tmp_path, "new.json", {"provenance": {"loadavg_start": [0.4, 0, 0], "loadavg_end": [1.9, 0, 0]}})
    _write(tmp_path, "peers.json", {"peers": {"x": {"rows": {"r": {"loadavg_1m_max": 3.0}}}}})
    _write(tmp_path, "old.json", {})
    rendered = results_table.render(_TABLE, tmp_path)
    assert "| new run | fast | 0.40 → 1.90 | `results/new.json` |" in rendered
    assert "| peers | 1.2\\|1.3× | peers: max 3.00; old: not recorded | `results/peers.json`, `results/old.json` |" in rendered
    assert rendered.endswith("## History\n") and results_table.render(rendered, tmp_path) == rendered


def test_check_names_the_stale_column_and_the_fix(tmp_path: Path, monkeypatch, capsys) -> None:
    _write(tmp_path, "new.json", {})
    _write(tmp_path, "peers.json", {})
    _write(tmp_path, "old.json", {})
    readme = tmp_path / "README.md"
    readme.write_text(_TABLE, encoding="utf-8")
    monkeypatch.setattr(results_table, "README", readme)
    assert results_table.main(["--check"]) == 1
    assert f"run `{results_table.COMMAND}`" in capsys.readouterr().err
    assert results_table.main(["--write"]) == 0
    assert results_table.main(["--check"]) == 0

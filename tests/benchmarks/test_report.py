"""Benchmark results carry their provenance (benchmarks/_report.py): written by the scripts, and
present in every kept result under benchmarks/results/."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import _report

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.e2e
def test_written_result_names_commit_argv_dates_machine_and_load(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    written = _report.write_json(out, {"rows": [1, 2]})
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(json.dumps(written, default=str))
    provenance = written["provenance"]
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert provenance["commit"] == head
    assert isinstance(provenance["dirty"], bool)
    assert provenance["argv"][0] == Path(sys.argv[0]).as_posix()
    assert provenance["started"] <= provenance["finished"]
    assert provenance["machine"]["logical_cpus"] >= 1 and provenance["machine"]["cpu"]
    assert len(provenance["loadavg_start"]) == len(provenance["loadavg_end"]) == 3
    assert written["rows"] == [1, 2]


def test_provenance_already_present_is_kept() -> None:
    mine = {"provenance": {"commit": "abc"}, "x": 1}
    assert _report.with_provenance(mine) is mine


def test_every_kept_result_carries_its_provenance() -> None:
    results = sorted((REPO / "benchmarks" / "results").glob("*.json"))
    assert results
    for path in results:
        provenance = json.loads(path.read_text(encoding="utf-8")).get("provenance")
        assert provenance, f"{path.name}: no provenance"
        assert {"commit", "argv", "started", "machine"} <= set(provenance), f"{path.name}: {sorted(provenance)}"

"""An end-to-end sweep on the demo corpus with tiny models: outputs, frontier, picks, resume after
SIGKILL (one sweep, killed and resumed, serves both tests)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from steadyrank.serve.tools.clq.frontier import pareto_front
from tests.clq.conftest import write_grid
from tests.tiers import e2e_fixture

DEMO = Path(__file__).resolve().parents[2] / "serve" / "data" / "demo"


def _command(grid: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "steadyrank.serve.cli", "clq", "sweep", "--grid", str(grid),
            "--corpus", str(DEMO / "corpus.jsonl"), "--golden", str(DEMO / "golden.jsonl"), "--out", str(out), *extra]


@dataclass(frozen=True)
class KilledAndResumed:
    """A sweep SIGKILLed once it had finished 3 configurations, then run again to the end."""

    out: Path
    finished: dict[str, bytes]  # the configurations' files as the killed run left them
    done: subprocess.CompletedProcess  # the resumed run (``--json``)


@pytest.fixture(scope="module")
@e2e_fixture
def killed_and_resumed(tmp_path_factory: pytest.TempPathFactory, tiny_models) -> KilledAndResumed:
    """One sweep for both tests below (a whole sweep is this module's cost): killed with SIGKILL
    after its third configuration, then resumed to the end, whose outputs are the sweep's."""
    root = tmp_path_factory.mktemp("sweep")
    grid = write_grid(root / "grid.yaml", *tiny_models)
    out = root / "out"
    process = subprocess.Popen(_command(grid, out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    deadline = time.monotonic() + 900
    configs = out / "configs"
    while time.monotonic() < deadline and len(list(configs.glob("*.json")) if configs.exists() else []) < 3:
        assert process.poll() is None, "the sweep ended before it could be killed"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    finished = {p.name: p.read_bytes() for p in configs.glob("*.json")}
    done = subprocess.run(_command(grid, out, "--json"), capture_output=True, text=True, timeout=900)
    return KilledAndResumed(out, finished, done)


def test_sweep_end_to_end(killed_and_resumed: KilledAndResumed) -> None:
    done, out = killed_and_resumed.done, killed_and_resumed.out
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    results = report["results"]
    assert len(results) == (2 * 3 + 1) * 3 * 2
    for r in results:
        assert 0 <= r["quality"]["ra_nwg@30"]["expected"] <= 1
        assert r["quality"]["ra_nwg@30"]["range"] >= 0
        assert r["latency"]["total"]["p95_ms"] >= r["latency"]["total"]["p50_ms"] > 0
        assert r["latency"]["rerank"]["p50_ms"] > 0  # every configuration reranks: its timed passes count
        assert r["latency_queries"] == 2
        assert len(r["load_average"]) == 3 and min(r["load_average"]) >= 0  # latencies carry the load they ran at
        assert r["cost"]["pair_tokens_reranked"] > 0
    by_id = {r["config_id"]: r for r in results}
    fixed = [r for r in results if r["k_policy"] in ("k5", "k10")]
    assert all(r["cost"]["candidates_reranked"] == {"k5": 5, "k10": 10}[r["k_policy"]] for r in fixed)
    dynamic = [r for r in results if r["k_policy"] == "dyn5-10"]
    assert all(5 <= r["cost"]["candidates_reranked"] <= 10 for r in dynamic)
    # PCA16 and Flat share one build per embedder × dimension × factory: 6 dense indexes (bm25 reuses one)
    assert len(list((out / "indexes").iterdir())) == 6
    # the frontier in the report is the exact frontier of the reported objectives
    assert len(report["load_average_at_end"]) == 3
    rows = report["configurations"]
    mask = pareto_front([r["cost_per_query"] for r in rows], [r["latency_ms"] for r in rows], [r["quality"] for r in rows])
    assert report["frontier"] == [r["config_id"] for r, m in zip(rows, mask, strict=False) if m]
    # an unbounded pick is the smallest-K configuration within noise of the best
    best = report["best"]
    unbounded = report["budget_picks"][0]
    assert unbounded["best_quality"] == best
    chosen = by_id[unbounded["pick"]]
    assert chosen["cost"]["candidates_reranked"] <= by_id[best]["cost"]["candidates_reranked"]
    assert unbounded["pick"] == best or unbounded["pick"] in unbounded["within_noise_of_best"]
    assert report["budget_picks"][1]["pick"] is None  # nothing is free
    assert (out / "clq.png").read_bytes()[:4] == b"\x89PNG"
    # scores were cached per regime: one file each, every scored pair reused across configurations
    assert len(list((out / "cache").glob("scores-*.json"))) == 2


def test_killed_sweep_resumes_with_finished_configurations(killed_and_resumed: KilledAndResumed) -> None:
    finished, done, configs = killed_and_resumed.finished, killed_and_resumed.done, killed_and_resumed.out / "configs"
    assert 3 <= len(finished) < 42
    for data in finished.values():
        json.loads(data)  # atomic writes: no torn file
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["reused"] == len(finished)
    assert f"{len(finished)} reused" in done.stderr
    for name, data in finished.items():
        assert (configs / name).read_bytes() == data  # reused, not recomputed
    assert len(report["results"]) == 42

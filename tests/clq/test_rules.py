"""The CLQ choice rules (quality target, efficiency, marginal ΔQ/Δms) against brute force and hand
computations, in ``decide``'s JSON and through ``steadyrank clq decide``."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from steadyrank.serve.cli.main import main
from steadyrank.serve.tools.clq.frontier import Candidate
from steadyrank.serve.tools.clq.grid import parse_grid
from steadyrank.serve.tools.clq.report import decide
from steadyrank.serve.tools.clq.rules import efficiency, marginal_table, quality_target_pick


def _c(name: str, cost: float, latency: float, quality: float, k: float = 10) -> Candidate:
    return Candidate(name, cost, latency, quality, k)


# -- quality target --------------------------------------------------------------------------------

def test_quality_target_by_hand() -> None:
    cands = [_c("cheap-low", 1, 50, 0.70), _c("fast-ok", 3, 80, 0.76), _c("fast-ok-cheaper", 2, 80, 0.75),
             _c("slow-best", 1, 300, 0.82)]
    # Q ≥ 0.75: fast-ok and fast-ok-cheaper tie on latency (80 ms); the cheaper one wins
    assert quality_target_pick(cands, 0.75).config_id == "fast-ok-cheaper"
    assert quality_target_pick(cands, 0.76).config_id == "fast-ok"
    assert quality_target_pick(cands, 0.80).config_id == "slow-best"
    assert quality_target_pick(cands, 0.83) is None
    assert quality_target_pick(cands, 0.0).config_id == "cheap-low"


def test_quality_target_ties_on_latency_and_cost_go_to_the_more_efficient() -> None:
    cands = [_c("a", 1, 80, 0.76), _c("b", 1, 80, 0.77)]
    assert quality_target_pick(cands, 0.75, {"a": 3.0, "b": 2.0}).config_id == "a"  # the tie-breaker decides
    assert quality_target_pick(cands, 0.75).config_id == "a"  # no efficiencies: the id


def brute_force_target(cands: list[Candidate], target: float, eff: dict[str, float]) -> str | None:
    """Every feasible candidate compared with every other: the one no other beats lexicographically."""
    feasible = [c for c in cands if c.quality >= target]
    for c in feasible:
        beaten = False
        for d in feasible:
            if d is c:
                continue
            for mine, theirs in ((c.latency, d.latency), (c.cost, d.cost), (-eff[c.config_id], -eff[d.config_id]),
                                 (c.config_id, d.config_id)):
                if theirs != mine:
                    beaten = theirs < mine
                    break
            if beaten:
                break
        if not beaten:
            return c.config_id
    return None


@pytest.mark.parametrize("seed", range(30))
def test_quality_target_equals_brute_force_with_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 25))
    cands = [_c(f"c{i:02d}", float(rng.integers(0, 3)), float(rng.integers(0, 4)), float(rng.integers(0, 5)) / 4)
             for i in range(n)]
    eff = {c.config_id: float(rng.integers(0, 3)) for c in cands}
    for target in (0.0, 0.25, 0.5, 0.75, 1.0, 1.25):
        got = quality_target_pick(cands, target, eff)
        assert (got and got.config_id) == brute_force_target(cands, target, eff)


# -- efficiency ------------------------------------------------------------------------------------

def test_efficiency_by_hand() -> None:
    eff = efficiency(0.78, rerank_p50_ms=250.0, total_p50_ms=260.0)
    assert eff.local == pytest.approx(0.78 / 0.250)  # 3.12 quality per second of reranker time
    assert eff.end_to_end == pytest.approx(3.0)
    assert efficiency(0.5, 0.0, 12.0).local is None


# -- marginal table --------------------------------------------------------------------------------

def brute_force_staircase(cands: list[Candidate]) -> list[Candidate]:
    """c stays iff no d is ≤ in latency and ≥ in quality and strictly better in one."""
    kept = [c for c in cands if not any(
        d.latency <= c.latency and d.quality >= c.quality and (d.latency < c.latency or d.quality > c.quality)
        for d in cands)]
    return sorted(kept, key=lambda c: (c.latency, c.quality, c.cost, c.config_id))


@pytest.mark.parametrize("seed", range(30))
def test_marginal_table_equals_brute_force(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 30))
    cands = [_c(f"c{i:02d}", float(rng.random()), float(rng.integers(0, 6)) * 10, float(rng.integers(0, 6)) / 5)
             for i in range(n)]
    steps = marginal_table(cands)
    expected = brute_force_staircase(cands)
    assert [s.config_id for s in steps] == [c.config_id for c in expected]
    assert steps[0].previous is None and steps[0].delta_quality is None
    for (a, b), step in zip(itertools.pairwise(expected), steps[1:], strict=True):
        assert step.previous == a.config_id
        assert step.delta_quality == pytest.approx(b.quality - a.quality)
        assert step.delta_ms == pytest.approx(b.latency - a.latency)
        assert step.delta_cost == pytest.approx(b.cost - a.cost)
        if b.latency > a.latency:
            assert step.delta_quality_per_ms == pytest.approx((b.quality - a.quality) / (b.latency - a.latency))
            assert step.delta_quality > 0  # a staircase: more latency buys strictly more quality
        else:
            assert step.delta_quality_per_ms is None  # an exact duplicate point


def test_marginal_table_by_hand() -> None:
    steps = marginal_table([_c("a", 1, 100, 0.70), _c("b", 1, 150, 0.72), _c("c", 2, 300, 0.78), _c("d", 0, 200, 0.71)])
    assert [s.config_id for s in steps] == ["a", "b", "c"]  # d: slower than b and worse
    assert steps[1].delta_quality_per_ms == pytest.approx(0.02 / 50)
    assert steps[2].delta_quality_per_ms == pytest.approx(0.06 / 150)
    assert marginal_table([]) == []


# -- decide and the command ------------------------------------------------------------------------

def _result(config_id: str, per_query: list[float], rerank_p50: float, total_p50: float, total_p95: float,
            k: float) -> dict:
    quality = float(np.mean(per_query))
    measures = {m: {"expected": quality, "range": 0.0} for m in ("ra_nwg@10", "ra_nwg@30", "ndcg@10", "nrecall4@30")}
    return {"config_id": config_id, "quality": measures | {"proc": 0, "proc_ratio": 1.0},
            "per_query": {f"q{i}": v for i, v in enumerate(per_query)},
            "latency": {"rerank": {"p50_ms": rerank_p50, "p95_ms": rerank_p50 * 1.2},
                        "total": {"p50_ms": total_p50, "p95_ms": total_p95}},
            "cost": {"candidates_reranked": k, "pair_tokens_reranked": 100 * k, "generator_prompt_tokens": 0.0,
                     "index_bytes": 0, "build_seconds": 0.0}}


GRID = {"embedders": [{"name": "m", "path": "bundled"}], "dimensions": ["full"], "ann": [{"name": "flat", "factory": "Flat"}],
        "first_stages": ["dense"], "k_policies": [{"name": "k10", "k": 10}],
        "rerankers": [{"name": "r", "path": "bundled"}], "prices": {"rerank_per_1k_tokens": 1.0},
        "bounds": {"quality_target": [0.5, 0.7, 0.95]}, "bootstrap": {"resamples": 500, "confidence": 0.95}}

RESULTS = [
    _result("fast", [0.4, 0.5, 0.6, 0.5], rerank_p50=90, total_p50=100, total_p95=120, k=10),     # Q 0.50
    _result("mid", [0.7, 0.8, 0.7, 0.8], rerank_p50=190, total_p50=200, total_p95=250, k=20),     # Q 0.75
    _result("slow", [0.8, 0.9, 0.8, 0.9], rerank_p50=390, total_p50=400, total_p95=500, k=40),    # Q 0.85
    _result("slower", [0.7, 0.8, 0.7, 0.8], rerank_p50=490, total_p50=500, total_p95=600, k=40),  # dominated
]


def test_decide_reports_targets_efficiency_and_marginal_steps(tmp_path: Path) -> None:
    grid = parse_grid(GRID, tmp_path)
    decision = decide(RESULTS, grid)
    picks = {p["quality_target"]: p for p in decision["quality_target_picks"]}
    assert picks[0.5]["pick"] == "fast" and picks[0.5]["feasible"] == 4
    assert picks[0.7]["pick"] == "mid" and picks[0.7]["latency_ms"] == 250
    assert picks[0.95]["pick"] is None and picks[0.95]["feasible"] == 0
    assert picks[0.5]["target_within_noise"]  # 0.50 exactly: the CI's lower end is below it
    assert not picks[0.7]["target_within_noise"]  # every resample of mid's queries averages ≥ 0.75
    rows = {r["config_id"]: r for r in decision["configurations"]}
    assert rows["mid"]["efficiency"]["local"] == pytest.approx(0.75 / 0.190)
    assert rows["mid"]["efficiency"]["end_to_end"] == pytest.approx(0.75 / 0.200)
    assert "tie-breaker only" in decision["efficiency_note"]
    steps = decision["marginal"]
    assert [s["config_id"] for s in steps] == ["fast", "mid", "slow"]
    assert steps[1]["delta_quality_per_ms"] == pytest.approx(0.25 / 130)  # p95 latency: 120 → 250 ms
    assert steps[2]["delta_quality_per_ms"] == pytest.approx(0.10 / 250)
    assert steps[2]["delta_cost"] == pytest.approx(2.0)  # 2,000 more tokens at 1.0 per 1,000
    assert steps[1]["within_noise"] is False and steps[2]["within_noise"] is False


def _write_inputs(tmp_path: Path, quality: str = "ra_nwg@30") -> tuple[Path, Path]:
    grid, results = tmp_path / "grid.yaml", tmp_path / "results.json"
    grid.write_text(json.dumps(GRID))  # JSON is YAML
    results.write_text(json.dumps({"quality_measure": quality, "queries": 4, "results": RESULTS}))
    return grid, results


def test_clq_decide_prints_and_writes_the_rules(tmp_path: Path, capsys) -> None:
    grid, results = _write_inputs(tmp_path)
    out = tmp_path / "decided"
    assert main(["clq", "decide", "--grid", str(grid), "--results", str(results), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "ra_nwg@30 ≥ 0.7: pick mid" in text
    assert "ra_nwg@30 ≥ 0.95: no configuration reaches it" in text
    assert "tie-breaker only" in text
    assert "Marginal ΔQ/Δms" in text and "1.92e-03" in text  # 0.25 / 130 ms
    written = json.loads((out / "results.json").read_text())
    assert written["decided_from"] == str(results) and len(written["marginal"]) == 3
    assert (out / "clq.png").stat().st_size > 0
    assert main(["clq", "decide", "--grid", str(grid), "--results", str(results), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["quality_target_picks"][1]["pick"] == "mid"


def test_clq_decide_refuses_another_quality_measure_and_a_foreign_file(tmp_path: Path, capsys) -> None:
    grid, results = _write_inputs(tmp_path, quality="ndcg@10")
    assert main(["clq", "decide", "--grid", str(grid), "--results", str(results)]) == 2
    assert "'ndcg@10'" in capsys.readouterr().err
    results.write_text("[1, 2]")
    assert main(["clq", "decide", "--grid", str(grid), "--results", str(results)]) == 2
    assert "not a sweep's results.json" in capsys.readouterr().err


def test_grid_refuses_a_bad_quality_target(tmp_path: Path) -> None:
    from steadyrank.serve.tools.clq.grid import GridError

    with pytest.raises(GridError, match="quality_target"):
        parse_grid(GRID | {"bounds": {"quality_target": ["high"]}}, tmp_path)

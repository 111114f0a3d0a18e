"""The CLQ grid's ``hygiene`` axis (near-duplicate suppression, lexical boost), the sweep running it,
and the report's "vs best" comparison, which no longer calls float rounding a change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from steadyrank.serve.tools.clq.grid import GridError, expand, parse_grid
from steadyrank.serve.tools.clq.report import versus
from tests.clq.test_grid import VALID

AXIS = [{"name": "plain"}, {"name": "dedup95", "dedup_threshold": 0.95},
        {"name": "boost1", "boost_weight": 1.0}, {"name": "both", "dedup_threshold": 0.95, "boost_weight": 0.5}]


def test_the_axis_multiplies_the_configurations_and_names_them(tmp_path: Path) -> None:
    plain = expand(parse_grid(VALID, tmp_path))
    configs = expand(parse_grid({**VALID, "hygiene": AXIS}, tmp_path))
    assert len(configs) == 4 * len(plain)
    assert {c.config_id.rsplit("/", 1)[1] for c in configs} == {"plain", "dedup95", "boost1", "both"}
    both = next(c for c in configs if c.config_id.endswith("/both"))
    assert (both.stages.dedup_threshold, both.stages.boost_weight) == (0.95, 0.5)
    assert len({c.fingerprint() for c in configs}) == len(configs)


def test_without_the_axis_ids_and_fingerprints_are_those_before_it(tmp_path: Path) -> None:
    """Values computed by the code before the axis existed (main at ab3cd20): a resumed sweep of
    an old grid reuses its finished configurations."""
    configs = expand(parse_grid(VALID, tmp_path))
    assert [(c.config_id, c.fingerprint()) for c in configs[:2]] == [
        ("minilm/full/flat/dense/k10/fp32", "02b616d44f01bb04"), ("minilm/full/flat/dense/k10/bf16", "10a7e01bbca9cede")]
    assert all(c.stages.dedup_threshold is None and c.stages.boost_weight == 0 for c in configs)


@pytest.mark.parametrize(("axis", "message"), [
    ([{"name": "x", "dedup_threshold": 1.5}], r"hygiene\[0\]: dedup threshold"),
    ([{"name": "x", "boost_weight": -1}], r"hygiene\[0\]: boost weight"),
    ([{"name": "x", "boost_weight": "high"}], r"hygiene\[0\].boost_weight must be a number"),
    ([{"name": "x", "dedup": 0.9}], r"hygiene\[0\]: unknown key"),
    ([{"name": "x"}, {"name": "x"}], "duplicated"),
    ([], "'hygiene' must be a non-empty list"),
])
def test_invalid_axis_entries_are_refused(tmp_path: Path, axis: list, message: str) -> None:
    with pytest.raises(GridError, match=message):
        parse_grid({**VALID, "hygiene": axis}, tmp_path)


def test_vs_best_calls_float_rounding_the_same_and_a_real_difference_a_change(tmp_path: Path) -> None:
    """The stored TREC sweep's case: per-query values equal up to 1e-17 (the same ranking, metric
    sums in another order) had a CI of [−2.8e-17, −1.3e-18] and were marked a change."""
    grid = parse_grid(VALID, tmp_path)
    best = {"per_query": {f"q{i}": 0.1 * i for i in range(43)}}
    rounding = {"per_query": {q: v - 5.551115123125783e-17 * (i % 2) for i, (q, v) in enumerate(best["per_query"].items())}}
    assert versus(best, rounding, grid)["within_noise"]
    assert versus(best, rounding, grid)["ci_high"] < 0  # the bare CI excludes 0: the old test failed here
    worse = {"per_query": {q: v - 0.01 for q, v in best["per_query"].items()}}
    assert not versus(best, worse, grid)["within_noise"]


@pytest.mark.e2e
def test_a_sweep_runs_the_axis_on_a_corpus_with_exact_copies(tmp_path: Path, tiny_models) -> None:
    """The demo corpus with a copy of every document a golden query judges (identical text, so
    identical stored vectors: cosine 1 under any embedder); tiny random models (stand-ins: quality
    means nothing here). Suppression at 0.999 demotes the copies; the boost reranks the same
    candidates; every configuration records its stages."""
    from steadyrank.retrieval.corpus import read_documents
    from steadyrank.serve.server.quality.golden_sets import load_golden
    from steadyrank.serve.tools.clq.grid import load_grid
    from steadyrank.serve.tools.clq.sweep import Inputs, Sweep
    from tests.clq.test_sweep import DEMO

    embedder, cross = tiny_models
    records = [json.loads(line) for line in (DEMO / "corpus.jsonl").read_text().splitlines() if line.strip()]
    corpus = tmp_path / "corpus.jsonl"
    copies = [{**r, "_id": f"{r['_id']}-copy"} for r in records]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records + copies))
    (tmp_path / "grid.yaml").write_text(f"""
embedders: [{{name: tiny, path: {embedder}}}]
dimensions: [full]
ann: [{{name: flat, factory: Flat}}]
first_stages: [dense]
k_policies: [{{name: k10, k: 10}}]
rerankers: [{{name: fp32-hps, path: {cross}}}]
hygiene: [{{name: plain}}, {{name: dedup, dedup_threshold: 0.999}}, {{name: boost, boost_weight: 1.0}}]
latency: {{stat: p95_ms, queries: 1}}
bootstrap: {{resamples: 50}}
""")
    grid = load_grid(tmp_path / "grid.yaml")
    sweep = Sweep(grid, Inputs.of(read_documents(corpus), load_golden(DEMO / "golden.jsonl")), tmp_path / "out",
                  log=lambda _: None)
    results = {r["hygiene"]: r for r in sweep.run()}
    assert results["plain"]["suppressed"] == 0 and results["boost"]["suppressed"] == 0
    assert results["dedup"]["suppressed"] >= 1  # every retrieved document's copy is retrieved beside it
    assert results["dedup"]["dedup_threshold"] == 0.999 and results["boost"]["boost_weight"] == 1.0
    assert results["plain"]["cost"]["candidates_reranked"] == results["boost"]["cost"]["candidates_reranked"] == 10
    assert results["dedup"]["cost"]["candidates_reranked"] < 10  # the copies were not reranked
    assert "hygiene" in results["dedup"]["latency"]

"""``clq sweep`` resolves its models as served (issue 41, offline = served): ``--config`` (else
``$STEADYRANK_SETTINGS``, else the embedded default) gives the model sections, each grid embedder's
path and each reranker regime's path/precision/scoring are written over them (unset: as served),
and the report names the settings ``steadyrank search`` resolves for the same file.

Tiny random models (stand-ins: no trained small reranker exists offline; quality means nothing),
the real sweep on the demo corpus in process. On main (2973895) ``--config`` did not exist and an
unset regime precision was FP32 whatever the server ran."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from steadyrank.serve.cli.commands.served import served_run
from steadyrank.serve.cli.main import main
from steadyrank.serve.output import dumps_json
from steadyrank.serve.runtime.resolution import overlay, scoring_json
from steadyrank.serve.tools.clq.grid import expand, parse_grid
from steadyrank.serve.tools.clq.sweep import LEGACY, Inputs, Sections, Sweep, fingerprint
from tests.clq.test_grid import VALID
from tests.clq.test_sweep import DEMO


def test_the_sweep_reports_the_served_settings_and_runs_unset_fields_as_served(
        tmp_path: Path, tiny_models, capsys, monkeypatch) -> None:
    embedder, cross = tiny_models
    monkeypatch.delenv("STEADYRANK_SETTINGS", raising=False)
    settings = tmp_path / "settings.yaml"  # differs from the defaults in every field the grid leaves unset
    settings.write_text(yaml.safe_dump({"cache_dir": str(tmp_path / "cache"),
                                        "embedder": {"path": str(embedder), "precision": "fp32", "max_length": 96},
                                        "reranker": {"path": str(cross), "precision": "fp32", "scoring": "native",
                                                     "max_length": 64}}))
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"""
embedders: [{{name: tiny, path: {embedder}}}]
dimensions: [full]
ann: [{{name: flat, factory: Flat}}]
first_stages: [dense]
k_policies: [{{name: k5, k: 5}}]
rerankers: [{{name: served, path: {cross}}}, {{name: bf16-hps, path: {cross}, precision: bf16, scoring: hps}}]
latency: {{queries: 1}}
bootstrap: {{resamples: 50}}
""")
    code = main(["clq", "sweep", "--config", str(settings), "--grid", str(grid), "--corpus", str(DEMO / "corpus.jsonl"),
                 "--golden", str(DEMO / "golden.jsonl"), "--out", str(tmp_path / "out"), "--json"])
    assert code == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    served = served_run(argparse.Namespace(config=str(settings)))  # what `steadyrank search --config` resolves
    assert report["settings"] == json.loads(dumps_json(served.to_json()))  # as printed (tuples: lists)
    assert served.describe() in err
    assert served.reranker is not None
    models = report["models"]
    assert models["rerankers"]["served"] == scoring_json(served.reranker)  # every field as served
    assert models["rerankers"]["served"]["scoring"] == "native" and models["rerankers"]["served"]["max_length"] == 64
    assert models["rerankers"]["bf16-hps"] == scoring_json(overlay(served.reranker, precision="bf16", scoring="hps"))
    assert models["embedders"]["tiny"] == scoring_json(served.embedder) and models["embedders"]["tiny"]["max_length"] == 96
    assert {r["config_id"] for r in report["results"]} == {"tiny/full/flat/dense/k5/served", "tiny/full/flat/dense/k5/bf16-hps"}
    # the served sections change the scores, so they key the caches: a second reranker regime file, not a reuse
    assert len(list((tmp_path / "out" / "cache").glob("scores-*.json"))) == 2


def test_a_grid_without_served_sections_keeps_its_resume_keys(tmp_path: Path) -> None:
    """Under the sections a sweep ran before (the default), an old grid's resume files keep their
    names (the fingerprint as computed before the served sections); under a served section that
    scores otherwise (BF16 where the grid left precision unset) they change, so nothing stale is reused."""
    from steadyrank.retrieval.corpus import read_documents
    from steadyrank.serve.runtime.settings import ModelSettings
    from steadyrank.serve.server.quality.golden_sets import load_golden
    from steadyrank.serve.tools.clq.sweep import measures_of

    grid = parse_grid(VALID, tmp_path)
    inputs = Inputs.of(read_documents(DEMO / "corpus.jsonl"), load_golden(DEMO / "golden.jsonl"))
    config = expand(grid)[0]
    assert config.reranker.precision is None  # the VALID grid's "fp32" regime leaves it unset
    old = json.dumps([config.fingerprint(), inputs.digest, grid.latency_queries, grid.generator_chunks,
                      measures_of(grid)])
    import hashlib

    assert fingerprint(config, grid, inputs) == hashlib.sha256(old.encode()).hexdigest()[:20]
    assert Sweep(grid, inputs, tmp_path, sections=LEGACY)._state_path(config).stem == fingerprint(config, grid, inputs)
    bf16 = Sections(reranker=ModelSettings(precision="bf16", scoring="hps"))
    assert Sweep(grid, inputs, tmp_path, sections=bf16)._state_path(config).stem != fingerprint(config, grid, inputs)

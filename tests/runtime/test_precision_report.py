"""`steadyrank precision-report` on a tiny BEIR folder (built in tmp): JSON shape, one forward pass
per dtype, candidates from a run, the plot, and one-line errors. Also its statistics helpers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from steadyrank.serve.cli.main import main
from steadyrank.serve.runtime.precision import choose_for
from steadyrank.serve.tools.precision.regimes import parse_regimes
from steadyrank.serve.tools.precision.stats import spearman, tie_statistics

KS = ["1", "3", "5", "10", "20", "50", "100"]


def _report(capsys, *argv: str) -> dict:
    assert main(["precision-report", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_bi_encoder_report_shape_and_work(capsys, beir_dir: Path, tmp_path: Path) -> None:
    plot = tmp_path / "curves.png"
    report = _report(capsys, "--data", str(beir_dir), "--depth", "3", "-m", "ndcg@10", "-m", "map@3",
                     "--rel-level", "2", "--plot-out", str(plot))
    assert list(report["regimes"]) == ["fp32", "bf16", "bf16+hps", "fp16", "fp16+hps"]
    candidates = report["candidates"]
    assert (candidates["source"], candidates["depth"], candidates["queries"]) == ("bm25", 3, 2)  # q3 unjudged
    assert 2 <= candidates["pairs"] <= 6  # BM25 returns only documents sharing a term
    # the 2 queries and their distinct candidates (no document matches both), once per dtype
    assert report["work"]["texts_encoded"] == 3 * (2 + candidates["pairs"])
    for _name, entry in report["regimes"].items():
        assert set(entry["metrics"]) == {"ndcg@10", "map@3"}
        row = entry["metrics"]["ndcg@10"]
        assert set(row) == {"oblivious", "expected", "min", "max", "range", "bias", "n_valid"}
        assert row["min"] <= row["expected"] <= row["max"]
        assert row["range"] == pytest.approx(row["max"] - row["min"])
        assert list(entry["ties"]["unique_at_k"]) == KS == list(entry["ties"]["mean_tie_group_size_at_k"])
        assert -1.0 <= entry["spearman_vs_fp32"] <= 1.0
    fp32 = report["regimes"]["fp32"]
    assert fp32["spearman_vs_fp32"] == 1.0 and fp32["metrics"]["ndcg@10"]["range"] == 0.0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cross_encoder_runs_each_pair_once_per_dtype(capsys, beir_dir: Path, cross_encoder_2: Path,
                                                     tmp_path: Path) -> None:
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 q1d3 1 9.0 x\nq1 Q0 q1d0 2 8.0 x\nq1 Q0 q1d1 3 7.0 x\nq2 Q0 q2d2 1 1.0 x\n")
    report = _report(capsys, "--model", str(cross_encoder_2), "--data", str(beir_dir), "--candidates", str(run),
                     "--depth", "2", "--regimes", "bf16+hps,bf16")
    assert report["kind"] == "cross-encoder"
    assert list(report["regimes"]) == ["bf16+hps", "bf16"]
    assert report["candidates"]["pairs"] == 3
    assert report["work"]["pairs_scored"] == 3 * 2  # FP32 reference + one BF16 pass for both regimes


def test_dense_first_stage_reuses_fp32_encodings(capsys, beir_dir: Path) -> None:
    report = _report(capsys, "--data", str(beir_dir), "--first-stage", "dense", "--depth", "4", "--regimes", "fp32")
    assert report["candidates"]["pairs"] == 8
    assert report["work"]["texts_encoded"] == 12 + 2  # the corpus and the judged queries, FP32 only


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--data", "/nonexistent/beir"], "not a directory"),
        (["--regimes", "bf8"], "unknown regime"),
        (["--depth", "0"], "must be positive"),
        (["-m", "ndcg"], "cannot parse measure"),
    ],
)
def test_errors_are_one_line(capsys, beir_dir: Path, argv: list[str], message: str) -> None:
    args = ["precision-report", "--data", str(beir_dir), *argv]
    code = None
    try:
        code = main(args)
    except SystemExit as exit_:  # argparse type errors
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) <= 2


def test_dense_needs_a_bi_encoder(capsys, beir_dir: Path, cross_encoder_1: Path) -> None:
    assert main(["precision-report", "--model", str(cross_encoder_1), "--data", str(beir_dir),
                 "--first-stage", "dense"]) == 2
    assert "needs a bi-encoder" in capsys.readouterr().err


def test_regimes_parse() -> None:
    parsed = parse_regimes("fp32, BF16+HPS,bf16,bf16")
    assert [(r.name, r.precision, r.scoring) for r in parsed] == [
        ("fp32", "fp32", "hps"), ("bf16+hps", "bf16", "hps"), ("bf16", "bf16", "native")]


def test_spearman_matches_scipy_with_ties() -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 5, 50).astype(float)
    b = a + rng.normal(0, 1, 50)
    assert spearman(a, b) == pytest.approx(spearmanr(a, b).statistic, abs=1e-12)
    assert np.isnan(spearman(np.ones(4), np.arange(4.0)))


def test_tie_statistics_on_constructed_keys() -> None:
    keys = {"q": np.array([0.9, 0.5, 0.5, 0.5, 0.1, 0.1])}  # groups of size 1, 3, 2
    stats = tie_statistics(keys, ks=(1, 2, 4, 10))
    assert stats["unique_at_k"] == {"1": 1.0, "2": 2.0, "4": 2.0, "10": 3.0}
    assert stats["mean_tie_group_size_at_k"] == {"1": 1.0, "2": 2.0, "4": 2.0, "10": 2.0}


@pytest.fixture
def beir_with_empty(beir_dir: Path, tmp_path: Path) -> Path:
    """``beir_dir`` plus two documents with empty texts (as held-out BEIR corpora such as Cranfield)."""
    root = tmp_path / "beir-empty"
    shutil.copytree(beir_dir, root)
    with (root / "corpus.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"_id": "blank1", "title": "", "text": ""}) + "\n")
        handle.write(json.dumps({"_id": "blank2", "title": "a title", "text": "   "}) + "\n")
    return root


def test_empty_documents_are_skipped_with_a_warning(capsys, beir_with_empty: Path) -> None:
    argv = ["precision-report", "--data", str(beir_with_empty), "--depth", "3", "--regimes", "fp32", "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    report, err = json.loads(captured.out), captured.err
    assert report["skipped_empty"] == 2 and report["candidates"]["queries"] == 2
    assert (f"warning: skipped 2 empty document(s) of 14 in {beir_with_empty / 'corpus.jsonl'} "
            "(ids: 'blank1', 'blank2'); --strict refuses them") in err


def test_strict_refuses_empty_documents(capsys, beir_with_empty: Path) -> None:
    assert main(["precision-report", "--data", str(beir_with_empty), "--regimes", "fp32", "--strict"]) == 2
    assert "corpus.jsonl:13: empty text for id 'blank1' (field 'text'; --strict refuses empty documents)" in capsys.readouterr().err



def test_int8_and_auto_regimes_and_what_auto_chose(capsys, beir_dir: Path, cross_encoder_1: Path,
                                                   tmp_path: Path) -> None:
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 q1d3 1 9.0 x\nq1 Q0 q1d0 2 8.0 x\nq1 Q0 q1d1 3 7.0 x\nq2 Q0 q2d2 1 1.0 x\n")
    report = _report(capsys, "--model", str(cross_encoder_1), "--data", str(beir_dir), "--candidates", str(run),
                     "--depth", "2", "--regimes", "int8,int8+hps,auto+hps", "--device", "cpu")
    assert list(report["regimes"]) == ["int8", "int8+hps", "auto+hps"]
    assert report["work"]["pairs_scored"] == 3 * 3  # FP32 reference, one int8 pass for both, one auto pass
    assert report["auto"] == choose_for("auto", "cpu").facts()
    assert main(["precision-report", "--model", str(cross_encoder_1), "--data", str(beir_dir), "--candidates",
                 str(run), "--depth", "2", "--regimes", "int8", "--device", "cpu"]) == 0
    assert f"precision auto on this machine: {report['auto']['precision']}" in capsys.readouterr().out


def test_the_report_scores_the_served_reranker_of_config(capsys, beir_dir: Path, cross_encoder_2: Path,
                                                         tmp_path: Path, monkeypatch) -> None:
    """Offline = served (issue 41): without ``--model``/``--max-length`` the report scores the reranker
    ``steadyrank search --config`` resolves (its path and max_length here), prints those settings on
    stderr and carries them in the report. On main (2973895) ``--config`` did not exist and the
    default was the bundled MiniLM at 512 tokens whatever the server served."""
    import argparse

    import yaml

    from steadyrank.serve.cli.commands.served import served_run
    from steadyrank.serve.output import dumps_json

    monkeypatch.delenv("STEADYRANK_SETTINGS", raising=False)
    settings = tmp_path / "settings.yaml"
    settings.write_text(yaml.safe_dump({"cache_dir": str(tmp_path / "cache"),
                                        "reranker": {"path": str(cross_encoder_2), "max_length": 48}}))
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 q1d3 1 9.0 x\nq1 Q0 q1d0 2 8.0 x\nq2 Q0 q2d2 1 1.0 x\n")
    assert main(["precision-report", "--config", str(settings), "--data", str(beir_dir), "--candidates", str(run),
                 "--regimes", "bf16", "--json"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    served = served_run(argparse.Namespace(config=str(settings)))  # what `steadyrank search --config` resolves
    assert served.describe() in err
    assert report["settings"] == json.loads(dumps_json(served.to_json()))
    assert report["kind"] == "cross-encoder"
    assert (report["scored_model"]["path"], report["scored_model"]["max_length"]) == (str(cross_encoder_2), 48)
    assert report["settings"]["reranker"]["path"] == str(cross_encoder_2)

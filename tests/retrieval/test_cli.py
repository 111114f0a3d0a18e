"""``steadyrank index|search|route`` end to end with the real bundled MiniLM (in-process CLI)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from steadyrank.metrics.io import read_trec_run
from steadyrank.retrieval.routing import load_settings
from steadyrank.serve.cli.main import main
from tests.retrieval.helpers import synthetic_documents, write_corpus

QUERIES = {"q1": "glacier and ocean temperature", "q2": "central bank interest rates", "q3": "volcano earthquake risk"}


@pytest.fixture(scope="module")
def beir(tmp_path_factory):
    """A tiny BEIR folder: 60 generated passages, 3 queries, graded qrels."""
    root = tmp_path_factory.mktemp("beir")
    docs = synthetic_documents(60, seed=21)
    write_corpus(root / "corpus.jsonl", docs)
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()))
    (root / "qrels").mkdir()
    lines = [f"{q}\t{docs[i * 7 + j].id}\t{1 + (i + j) % 3}" for i, q in enumerate(QUERIES) for j in range(4)]
    (root / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture(scope="module")
def index(beir, tmp_path_factory):
    out = tmp_path_factory.mktemp("index") / "idx"
    assert main(["index", "build", "--corpus", str(beir), "--out", str(out), "--factory", "HNSW32,Flat"]) == 0
    return out


def run_json(capsys, argv: list[str]) -> dict:
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_build_search_rerank_dynamic(index, beir, tmp_path, capsys):
    info = run_json(capsys, ["index", "info", "--index", str(index)])
    assert info["live_count"] == 60 and info["dense"]["factory"] == "HNSW32,Flat"
    assert info["embedder"]["model_id"] == "sentence-transformers/all-MiniLM-L6-v2" and info["embedder"]["dim"] == 384
    run = tmp_path / "run.trec"
    summary = run_json(capsys, [
        "search", "--index", str(index), "--queries", str(beir), "--run-out", str(run), "--mode", "hybrid",
        "--depth", "20", "--k-low", "5", "--rerank", "bundled", "--route", "dynamic", "--denoise", "rules",
    ])
    assert summary["queries"] == 3 and summary["route"] == "dynamic"
    trec = read_trec_run(run)
    assert set(trec) == set(QUERIES) and all(len(r) == 20 for r in trec.values())
    report = json.loads((tmp_path / "run.trec.json").read_text())
    for qid, q in report["per_query"].items():
        assert q["k_reranked"] in (5, 20) and q["escalated"] == (q["k_reranked"] == 20)
        assert bool(q["reasons"]) == q["escalated"] and set(q["signals"]) >= {"dense_margin", "overlap"}
        assert set(q["stages_ms"]) == {"denoise", "embed", "retrieve", "rerank", "route"} and "fuse" in q["retrieval_ms"]
        assert q["query"]["denoise"] == "rules" and q["query"]["rewritten"] == q["query"]["original"]
        assert len(q["candidates"]) == q["k_reranked"]
        keys = [c["rank_key"] for c in q["candidates"]]
        assert keys == sorted(keys, reverse=True)
        assert all(trec[qid][c["id"]] == pytest.approx(c["rank_key"]) for c in q["candidates"])
    assert set(report["latency"]) == {"denoise", "embed", "retrieve", "rerank", "route"}


def test_bm25_search_without_reranker(index, beir, tmp_path, capsys):
    summary = run_json(capsys, ["search", "--index", str(index), "--queries", str(beir), "--run-out", str(tmp_path / "r"),
                                "--mode", "bm25", "--depth", "10", "--no-rerank"])
    assert summary["mean_k_reranked"] == 0 and summary["route"] is None
    assert all(len(r) <= 10 for r in read_trec_run(tmp_path / "r").values())


def test_add_delete_info(index, tmp_path, capsys):
    extra = write_corpus(tmp_path / "extra.jsonl", synthetic_documents(3, seed=5, prefix="extra"))
    assert run_json(capsys, ["index", "add", "--index", str(index), "--docs", str(extra)])["live_count"] == 63
    state = run_json(capsys, ["index", "delete", "--index", str(index), "--ids", "extra0", "extra1"])
    assert state["live_count"] == 61 and state["wal_records"] == 2
    state = run_json(capsys, ["index", "compact", "--index", str(index)])
    assert state["live_count"] == 61 and state["wal_records"] == 0 and state["generation_dir"] == "gen-000002"


def test_calibrate_writes_settings_that_search_accepts(index, beir, tmp_path, capsys):
    settings = tmp_path / "routing.json"
    payload = run_json(capsys, ["route", "calibrate", "--data", str(beir), "--index", str(index),
                                "--settings-out", str(settings), "--depth", "20", "--k-low", "5",
                                "--objective", "rate", "--target-rate", "0.5"])
    assert payload["calibration"]["n_queries"] == 3 and payload["calibration"]["escalation_rate"] <= 0.5
    loaded = load_settings(settings)
    assert (loaded.k_low, loaded.k_high) == (5, 20)
    summary = run_json(capsys, ["search", "--index", str(index), "--queries", str(beir), "--run-out", str(tmp_path / "r"),
                                "--depth", "20", "--rerank", "bundled", "--route-settings", str(settings),
                                "--top-n", "5"])  # k_low is raised to top_n, as /v1/search does
    assert summary["routing"]["k_low"] == 5


MODEL_CALIBRATION = ["route", "calibrate", "--model", "--depth", "20", "--k-low", "5", "--objective", "rate",
                     "--target-rate", "0.5"]


@pytest.fixture(scope="module")
def model_calibration(index, beir, tmp_path_factory) -> tuple[dict, Path]:
    """One ``route calibrate --model`` run (every signal), shared by the two tests that read it:
    its ``--json`` summary and the routing model it wrote."""
    settings = tmp_path_factory.mktemp("routing-model") / "routing-model.json"
    out = io.StringIO()
    with redirect_stdout(out):
        assert main([*MODEL_CALIBRATION, "--data", str(beir), "--index", str(index), "--settings-out", str(settings),
                     "--json"]) == 0
    return json.loads(out.getvalue()), settings


def test_calibrate_model_writes_a_routing_model_that_search_accepts(model_calibration, index, beir, tmp_path, capsys):
    payload, settings = model_calibration
    assert payload["calibration"]["model"] is True and payload["calibration"]["escalation_rate"] <= 0.5
    loaded = load_settings(settings)
    assert (loaded.margin_below, loaded.entropy_above, loaded.tie_enabled, loaded.overlap_below) == (None, None, False, None)
    summary = run_json(capsys, ["search", "--index", str(index), "--queries", str(beir), "--run-out", str(tmp_path / "r"),
                                "--depth", "20", "--rerank", "bundled", "--route-settings", str(settings),
                                "--top-n", "5"])  # k_low is raised to top_n, as /v1/search does
    assert summary["routing"]["k_low"] == 5


def test_calibrate_model_features_restrict_what_the_model_reads(model_calibration, index, beir, tmp_path, capsys):
    settings = tmp_path / "routing-boundary.json"
    common = [*MODEL_CALIBRATION, "--data", str(beir), "--index", str(index), "--settings-out", str(settings)]
    assert len(model_calibration[0]["calibration"]["model_features"]) == 6  # by default every signal
    payload = run_json(capsys, [*common, "--model-features", "boundary_gap"])
    assert payload["calibration"]["model_features"] == ["boundary_gap"]
    assert set(load_settings(settings).model_features) <= {"boundary_gap"}  # () when no query gains
    capsys.readouterr()
    assert main([*common, "--model-features", "nonsense"]) == 2
    assert "model features" in capsys.readouterr().err


def test_user_errors_exit_2_with_a_message(index, beir, tmp_path, capsys):
    capsys.readouterr()
    assert main(["search", "--index", str(index), "--queries", str(beir), "--run-out", str(tmp_path / "r"),
                 "--no-rerank", "--route", "dynamic"]) == 2
    assert "--no-rerank conflicts with --route" in capsys.readouterr().err
    assert main(["index", "build", "--corpus", str(beir), "--out", str(index)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["index", "delete", "--index", str(index), "--ids", "no-such-doc"]) == 2
    assert "no-such-doc" in capsys.readouterr().err


def test_index_build_says_and_records_the_embedder_prompts(beir, tmp_path, capsys):
    """``--embedder-prompts`` (issue 37, item 3): the documents are embedded after the document
    prompt, the manifest and the one-line report say which, and adding with other prompts is refused."""
    out = tmp_path / "prompted"
    prompts = '{"query": "query: ", "passage": "passage: "}'
    capsys.readouterr()
    assert main(["index", "build", "--corpus", str(beir), "--out", str(out), "--embedder-prompts", prompts]) == 0
    line = capsys.readouterr().out
    assert "document prompt 'passage: ', query prompt 'query: '" in line
    state = run_json(capsys, ["index", "info", "--index", str(out)])
    assert state["embedder"]["prompts"] == {"query": "query: ", "document": "passage: "}
    extra = write_corpus(tmp_path / "extra.jsonl", synthetic_documents(2, seed=5, prefix="extra"))
    assert main(["index", "add", "--index", str(out), "--docs", str(extra)]) == 2
    assert "prompts" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:  # argparse's usage error
        main(["index", "build", "--corpus", str(beir), "--out", str(out), "--embedder-prompts", "[1]"])
    assert refused.value.code == 2 and "a JSON object of prompt name" in capsys.readouterr().err


def test_search_runs_the_hygiene_stages_named_by_flags(index, beir, tmp_path, capsys):
    """``--dedup-threshold`` / ``--boost-weight`` switch the stages on: ``stages_ms`` names them (the
    server's stage names), the settings in force carry them, a suppressed id is served after every
    kept one. At cosine −1 every candidate after the first is a near-duplicate of it."""
    run = tmp_path / "run.trec"
    summary = run_json(capsys, ["search", "--index", str(index), "--queries", str(beir), "--run-out", str(run),
                                "--mode", "dense", "--depth", "10", "--k-low", "5", "--rerank", "bundled",
                                "--dedup-threshold", "-1", "--boost-weight", "0.1"])
    assert (summary["settings"]["dedup_threshold"], summary["settings"]["boost_weight"]) == (-1.0, 0.1)
    assert {"dedup", "boost"} <= set(summary["latency"])
    report = json.loads((tmp_path / "run.trec.json").read_text())
    trec = read_trec_run(run)
    for qid, q in report["per_query"].items():
        assert {"retrieve", "dedup", "rerank", "route", "boost"} <= set(q["stages_ms"])
        assert q["k_reranked"] == 1 and len(q["suppressed"]) == 9
        kept = q["candidates"][0]["id"]
        assert set(q["suppressed"].values()) == {kept}
        ranked = sorted(trec[qid], key=lambda d: -trec[qid][d])
        assert ranked[0] == kept and set(ranked[1:]) == set(q["suppressed"])


@pytest.mark.parametrize(("flags", "message"), [
    (["--dedup-threshold", "1.5"], "expected a cosine in [-1, 1] or off"),
    (["--boost-weight", "-1"], "expected a finite number ≥ 0"),
    (["--boost-weight", "inf"], "expected a finite number ≥ 0"),
    (["--no-rerank", "--boost-weight", "0.5"], "--no-rerank conflicts with --boost-weight"),
])
def test_search_refuses_bad_hygiene_flags(index, beir, tmp_path, capsys, flags, message):
    argv = ["search", "--index", str(index), "--queries", str(beir), "--run-out", str(tmp_path / "r"), *flags]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refuses a bad value itself
        code = exc.code
    assert code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
def test_search_max_chunks_per_doc_scores_each_candidate_by_its_best_chunk(index, beir, tmp_path, capsys):
    """``search --max-chunks-per-doc``: a reranked candidate's key is the largest FP32 key of its
    chunks, each chunk scored alone by the real bundled MiniLM (brute force, one pass per chunk)."""
    from steadyrank.serve.runtime import ModelSettings, load_scorer
    from steadyrank.serve.runtime.chunking import chunk_planner
    from steadyrank.serve.server.http.dialects.documents import TokenCutter

    config = tmp_path / "settings.yaml"
    config.write_text("chunking:\n  chunk_tokens: 8\n  overlap_tokens: 2\n")
    run = tmp_path / "run.trec"
    summary = run_json(capsys, ["search", "--config", str(config), "--index", str(index), "--queries", str(beir),
                                "--run-out", str(run), "--mode", "dense", "--depth", "5", "--k-low", "5",
                                "--rerank", "bundled", "--rerank-precision", "fp32", "--route", "fixed50",
                                "--max-chunks-per-doc", "16"])
    assert summary["max_chunks_per_doc"] == 16
    report = json.loads((tmp_path / "run.trec.json").read_text())
    texts = {json.loads(line)["_id"]: json.loads(line)["text"] for line in (beir / "corpus.jsonl").open()}
    model = ModelSettings(precision="fp32")
    scorer = load_scorer(model)
    plan = chunk_planner(TokenCutter(model).encoder(), scorer.input_room(), 8, 2, 16)
    for qid, q in report["per_query"].items():
        query = QUERIES[qid]
        for candidate in q["candidates"]:
            chunks = plan(query, [texts[candidate["id"]]])
            assert chunks.counts[0] > 1  # 8-token chunks: every synthetic document is cut
            best = max(float(scorer.score([(query, t)]).keys[0]) for t in chunks.texts)
            assert candidate["rank_key"] == pytest.approx(best, abs=2e-6)

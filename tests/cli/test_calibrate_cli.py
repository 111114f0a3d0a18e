"""``steadyrank calibrate`` (issue 37 item 5) on the embedded demo golden set with the bundled
all-MiniLM-L6-v2 (real weights) as the reranker, in FP32: the calibration file records the model,
precision, golden set and threshold; its map is the maximum-likelihood logistic map of the fit
half's keys (checked against scipy on keys scored here independently); its ECE and Brier score are
those of the held-out half (recomputed here by hand); the PNG is written. Refusals (one class only,
a golden file without its corpus) come before any model work."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from steadyrank.serve.cli.main import main

pytestmark = pytest.mark.integration


def test_calibrate_fits_on_one_half_and_reports_on_the_other(tmp_path, capsys) -> None:
    from scipy.optimize import minimize

    from steadyrank.retrieval.corpus import read_corpus
    from steadyrank.serve.runtime import ModelSettings, load_scorer
    from steadyrank.serve.runtime.inspection import BUNDLED_MODEL_ID
    from steadyrank.serve.server.default import DEMO_CORPUS
    from steadyrank.serve.server.quality.golden_sets import load_golden

    out = tmp_path / "minilm.json"
    assert main(["calibrate", "--rerank", "bundled", "--rerank-precision", "fp32", "--calibration-out", str(out),
                 "--seed", "3", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    written = json.loads(out.read_text())
    assert printed == written
    assert (written["model_id"], written["precision"], written["scoring"]) == (BUNDLED_MODEL_ID, "fp32", "hps")
    assert written["golden"]["id"] == "demo" and re.fullmatch(r"[0-9a-f]{64}", written["golden"]["sha256"])
    assert re.fullmatch(r"[0-9a-f]{64}", written["model_digest"]) and written["threshold"] == 3
    assert (tmp_path / "minilm.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # the same pairs scored here, split by the file's fit queries
    golden = load_golden(None)
    texts = {d.id: d.full_text for d in read_corpus(DEMO_CORPUS, strict=False).documents}
    scorer = load_scorer(ModelSettings(precision="fp32"))
    fit_queries = set(written["fit"]["fit_query_ids"])
    keys: dict[bool, list[float]] = {True: [], False: []}
    relevant: dict[bool, list[int]] = {True: [], False: []}
    for q in golden.queries.values():
        docs = list(q.judgments)
        scored = scorer.score([(q.query, texts[d]) for d in docs]).keys
        keys[q.query_id in fit_queries] += scored.tolist()
        relevant[q.query_id in fit_queries] += [int(q.judgments[d] >= 3) for d in docs]
    assert len(fit_queries) == 20 and written["fit"]["fit_pairs"] == len(keys[True])

    x, y = np.array(keys[True]), np.array(relevant[True])

    def nll(theta: np.ndarray) -> float:
        z = theta[0] * x + theta[1]
        return float(np.sum(np.logaddexp(0, z) - y * z))

    best = minimize(nll, np.zeros(2), method="BFGS", options={"gtol": 1e-9}).x
    assert (written["slope"], written["intercept"]) == pytest.approx((best[0], best[1]), rel=1e-3)

    held_x, held_y = np.array(keys[False]), np.array(relevant[False])
    p = 1 / (1 + np.exp(-(written["slope"] * held_x + written["intercept"])))
    bins = np.minimum((p * 10).astype(int), 9)
    ece = sum(np.sum(bins == b) / p.size * abs(held_y[bins == b].mean() - p[bins == b].mean())
              for b in range(10) if np.any(bins == b))
    held = written["held_out"]
    assert held["pairs"] == p.size and held["relevant"] == int(held_y.sum())
    assert held["ece"] == pytest.approx(ece, abs=1e-6)
    assert held["brier"] == pytest.approx(float(np.mean((p - held_y) ** 2)), abs=1e-6)
    assert [b["count"] for b in held["reliability"]] == [int(np.sum(bins == b)) for b in range(10)]


def test_calibrate_refuses_one_class_and_a_golden_file_without_its_corpus(tmp_path, capsys) -> None:
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(json.dumps({"query_id": f"q{i}", "query": f"query {i}",
                                          "judgments": {f"d{i}-{j}": 5 for j in range(6)}}) + "\n" for i in range(8)))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}-{j}", "text": "a text"}) + "\n"
                              for i in range(8) for j in range(6)))
    out = str(tmp_path / "c.json")
    assert main(["calibrate", "--golden", str(golden), "--corpus", str(corpus), "--calibration-out", out]) == 2
    assert "one class only: every one of the 48 judged pairs of the golden set is relevant" in capsys.readouterr().err
    assert main(["calibrate", "--golden", str(golden), "--calibration-out", out]) == 2
    assert "--corpus is required with a golden set file" in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()

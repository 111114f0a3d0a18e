"""``steadyrank probe names`` / ``probe noise`` end to end on the bundled MiniLM and tiny data built here."""

from __future__ import annotations

import json

import pytest

from steadyrank.serve.cli.main import main
from steadyrank.serve.tools.probes.bundles import generate


def test_probe_names_from_a_bundle_file_with_json_and_plot(tmp_path, capsys):
    bundles = tmp_path / "bundles.jsonl"
    bundles.write_text("".join(json.dumps(b.to_json()) + "\n" for b in generate(6, "en", seed=1) + generate(6, "fr", seed=1)),
                       encoding="utf-8")
    plot = tmp_path / "dd.png"
    assert main(["probe", "names", "--bundles", str(bundles), "--ablations", "mask,initials", "--json",
                 "--plot-out", str(plot)]) == 0
    out = json.loads(capsys.readouterr().out)
    by = {(r["ablation"], r["lang"]): r for r in out["summary"]}
    assert set(by) == {(a, lang) for a in ("base", "mask", "initials") for lang in ("en", "fr")}
    for lang in ("en", "fr"):
        assert by[("base", lang)]["delta_name"]["mean"] > 0.02   # MiniLM separates the author from impostors
        assert by[("mask", lang)]["ties"]["name"] == 6            # masked: C1 and the impostors are the same text
        assert by[("mask", lang)]["delta_delta_pct"]["mean"] == pytest.approx(-100.0)
    assert plot.stat().st_size > 0


def test_probe_names_refuses_unknown_ablations(capsys):
    assert main(["probe", "names", "--queries", "2", "--ablations", "bogus"]) == 2
    assert "unknown ablation" in capsys.readouterr().err


def test_probe_noise_cosines_and_retrieval_effect_on_a_tiny_beir_folder(tmp_path, capsys):
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    docs = {"d1": "The mercury thermometer was invented by Daniel Gabriel Fahrenheit in 1714.",
            "d2": "Left ventricular hypertrophy is caused by high blood pressure and aortic stenosis.",
            "d3": "Axon terminals release neurotransmitters at the synapse.",
            "d4": "Coral reefs bleach when ocean temperatures rise."}
    queries = {"q1": "who invented the mercury thermometer", "q2": "causes of left ventricular hypertrophy",
               "q3": "what do axon terminals release"}
    (beir / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in docs.items()))
    (beir / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in queries.items()))
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t3\nq2\td2\t3\nq3\td3\t2\n")
    assert main(["probe", "noise", "--queries", str(beir), "--beir", str(beir), "--depth", "4",
                 "--grade-map", "3:5,2:4,1:3,0:1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cosine"]["0"]["noisy"]["cosine"]["mean"] == pytest.approx(1.0, abs=1e-6)
    assert out["cosine"]["4"]["noisy"]["cosine"]["mean"] < out["cosine"]["2"]["noisy"]["cosine"]["mean"] < 1.0
    assert out["cosine"]["2"]["denoised"]["cosine"]["mean"] > out["cosine"]["2"]["noisy"]["cosine"]["mean"]
    assert set(out["retrieval"]) == {"clean", "clean+rules", "noise2", "noise2+rules", "noise4", "noise4+rules"}
    assert out["retrieval"]["clean"]["ndcg@10"]["mean"] == pytest.approx(1.0)
    assert out["retrieval"]["clean+rules"]["ndcg@10"]["delta_vs_clean"] == 0.0


def test_probe_noise_defaults_to_the_embedded_demo_queries(capsys):
    """No --queries: the demo set's 40 queries; rules brings level 4 back closer to clean than the noise."""
    assert main(["probe", "noise", "--levels", "0,4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["queries"] == 40 and out["levels"] == [0, 4]
    assert out["cosine"]["4"]["denoised"]["cosine"]["mean"] > out["cosine"]["4"]["noisy"]["cosine"]["mean"]


def test_probe_noise_on_the_held_out_phrasings_reports_the_recovered_share(capsys):
    """``--noise heldout``: only the held-out half of the queries, noised with the held-out fragments;
    the recovery per level is (denoised − noisy) / (clean − noisy) of the arms' means."""
    from steadyrank.retrieval.corpus import read_queries
    from steadyrank.serve.server.default import DEMO_DIR
    from steadyrank.serve.tools.probes.phrasings import query_half

    assert main(["probe", "noise", "--noise", "heldout", "--beir", "demo", "--mode", "bm25", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["noise"] == "heldout"
    assert out["queries"] == sum(query_half(q) == "heldout" for q in read_queries(DEMO_DIR))
    ret = out["retrieval"]
    assert ret["clean+rules"]["ndcg@10"]["delta_vs_clean"] == 0.0
    lost = ret["clean"]["ndcg@10"]["mean"] - ret["noise4"]["ndcg@10"]["mean"]
    assert lost > 0
    assert out["recovery"]["4"]["ndcg@10"] == pytest.approx(
        (ret["noise4+rules"]["ndcg@10"]["mean"] - ret["noise4"]["ndcg@10"]["mean"]) / lost)
    assert main(["probe", "noise", "--noise", "dev", "--lang", "fr"]) == 2
    assert "English" in capsys.readouterr().err


def test_probe_noise_measures_the_llm_rewrite_on_the_held_out_phrasings(capsys):
    """``--denoise llm`` against a stand-in chat server (no LLM runs here: tests/golden/llm_standin.py
    speaks the OpenAI protocol and answers with the query's first question): the documented way for
    conversational traffic is measured by the same command as ``rules``."""
    from tests.golden.llm_standin import MODEL, StandinLLM

    with StandinLLM() as llm:
        assert main(["probe", "noise", "--noise", "heldout", "--levels", "0,4", "--denoise", "llm",
                     "--denoise-llm-url", llm.base_url, "--denoise-llm-model", MODEL, "--json"]) == 0
        assert llm.requests > 0
    out = json.loads(capsys.readouterr().out)
    assert out["denoise"] == "llm" and out["noise"] == "heldout"
    assert 0 < out["cosine"]["4"]["denoised"]["cosine"]["mean"] <= 1

"""``probe names --retrieval``: Recall@k of the right passage through the real index and pipeline
(bundled MiniLM, FAISS, BM25), against a brute-force ranking and hand computations."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from steadyrank.serve.cli.main import main
from steadyrank.serve.tools.probes.bundles import SLOTS, default_templates, generate
from steadyrank.serve.tools.probes.margins import Margins, ProbeRow
from steadyrank.serve.tools.probes.retrieval import (
    bundle_corpus,
    parse_ks,
    recall_of_right_passage,
    summarize_retrieval,
)


@pytest.fixture(scope="module")
def embedder():
    from steadyrank.serve.cli.commands.index import load_embedder_arg

    return load_embedder_arg(None, "fp32")


def brute_force_bounds(vectors: np.ndarray, doc_ids: list[str], query_vector: np.ndarray, right: str,
                       k: int) -> tuple[float, float]:
    """Bounds of Recall@k of ``right`` from every cosine in float64. Documents within ``EPS`` of its
    score are a near-tie whose order float32 rounding decides (FAISS's batched inner product rounds
    one vector differently by its row): with ``a`` documents clearly above and ``t`` in the near-tie
    (itself included), the recall is 1 when ``a + t ≤ k``, 0 when ``a ≥ k``, and between otherwise;
    an isolated score (``t = 1``) fixes it exactly."""
    scores = vectors.astype(np.float64) @ query_vector.astype(np.float64)
    mine = scores[doc_ids.index(right)]
    above, near = int((scores > mine + EPS).sum()), int((np.abs(scores - mine) <= EPS).sum())
    if above >= k:
        return 0.0, 0.0
    if above + near <= k:
        return 1.0, 1.0
    return 0.0, 1.0


EPS = 1e-6


@pytest.mark.parametrize("ablation", ["base", "mask", "near_miss"])
def test_recall_agrees_with_brute_force_over_the_whole_corpus(ablation: str, embedder, tmp_path: Path) -> None:
    bundles = generate(4, "en", seed=3) + generate(4, "fr", seed=3)
    documents, queries = bundle_corpus(bundles, ablation, default_templates(), seed=3)
    ks = (1, 3, 10)
    got = asyncio.run(recall_of_right_passage(documents, queries, embedder, None, "dense", ks, tmp_path / "index"))
    assert set(got) == set(queries)
    vectors = embedder.encode([d.full_text for d in documents])
    ids = [d.id for d in documents]
    decided = 0
    for qid, text in queries.items():
        q = embedder.encode([text])[0]
        for k in ks:
            low, high = brute_force_bounds(vectors, ids, q, f"{qid}/C1", k)
            assert low - 1e-9 <= got[qid][f"recall@{k}"] <= high + 1e-9, (qid, k)
            decided += low == high
    assert decided >= len(queries)  # cutoffs past every near-tie are fixed exactly, not only bounded
    if ablation == "mask":  # C1 and both impostors are one text: none is ever strictly first at k = 1 by content
        assert all(brute_force_bounds(vectors, ids, embedder.encode([t])[0], f"{qid}/C1", 1) == (0.0, 1.0)
                   for qid, t in queries.items())


def test_bundle_corpus_names_every_passage_after_its_bundle_and_slot() -> None:
    bundles = generate(2, "en", seed=0)
    documents, queries = bundle_corpus(bundles, "base", default_templates(), seed=0)
    assert [d.id for d in documents] == [f"{b.id}/{s}" for b in bundles for s in SLOTS]
    assert set(queries) == {b.id for b in bundles}
    with pytest.raises(ValueError, match="distinct bundle ids"):
        bundle_corpus(bundles + bundles[:1], "base", default_templates(), seed=0)


def _row(bundle: str, ablation: str, name: float) -> ProbeRow:
    return ProbeRow(bundle, "en", ablation, (0.0,) * 5, Margins(name, 0.0, 0.0))


def test_summary_by_hand() -> None:
    rows = [_row("a", "base", 0.2), _row("b", "base", 0.1), _row("c", "base", -0.1), _row("d", "base", 0.0)]
    recalls = {("base", "a"): {"recall@1": 1.0, "recall@5": 1.0}, ("base", "b"): {"recall@1": 0.0, "recall@5": 1.0},
               ("base", "c"): {"recall@1": 0.0, "recall@5": 0.5}, ("base", "d"): {"recall@1": 0.5, "recall@5": 1.0}}
    (record,) = summarize_retrieval(rows, recalls, (1, 5))
    assert record["n"] == 4
    assert record["delta_name"]["mean"] == pytest.approx(0.05)
    assert record["recall@1"]["mean"] == pytest.approx(0.375)
    assert record["recall@5"]["mean"] == pytest.approx(0.875)
    assert record["by_margin"] == {"measure": "recall@1", "positive": {"mean": 0.5, "n": 2},
                                   "not_positive": {"mean": 0.25, "n": 2}}


def test_recall_cutoffs_are_parsed_and_checked() -> None:
    assert parse_ks("10, 1,1") == (1, 10)
    for bad in ("0,1", "one", ""):
        with pytest.raises(ValueError, match="--recall-k"):
            parse_ks(bad)


def test_probe_names_retrieval_command(tmp_path: Path, capsys) -> None:
    bundles = tmp_path / "bundles.jsonl"
    bundles.write_text("".join(json.dumps(b.to_json()) + "\n" for b in generate(5, "en", seed=2) + generate(5, "fr", seed=2)),
                       encoding="utf-8")
    assert main(["probe", "names", "--bundles", str(bundles), "--ablations", "mask", "--retrieval", "--mode", "bm25",
                 "--recall-k", "1,5", "--precision", "fp32", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["retrieval"]["mode"] == "bm25" and out["retrieval"]["k"] == [1, 5]
    by = {(r["ablation"], r["lang"]): r for r in out["retrieval"]["summary"]}
    assert set(by) == {(a, lang) for a in ("base", "mask") for lang in ("en", "fr")}
    for lang in ("en", "fr"):
        # BM25 under mask: C1 and both impostors are one text, a three-way tie at best
        assert by[("mask", lang)]["recall@1"]["mean"] <= 1 / 3 + 1e-9
        assert by[("mask", lang)]["by_margin"]["not_positive"]["n"] == 5  # every masked Δname is a tie (0)
        assert by[("base", lang)]["recall@1"]["mean"] > by[("mask", lang)]["recall@1"]["mean"]
        assert by[("base", lang)]["n"] == 5
    assert main(["probe", "names", "--bundles", str(bundles), "--ablations", "mask", "--retrieval",
                 "--precision", "fp32"]) == 0
    assert "R@1 of C1" in capsys.readouterr().out


def test_probe_names_retrieval_refuses_a_remote_model(capsys) -> None:
    assert main(["probe", "names", "--queries", "2", "--retrieval", "--url", "http://127.0.0.1:9"]) == 2
    assert "in-process" in capsys.readouterr().err

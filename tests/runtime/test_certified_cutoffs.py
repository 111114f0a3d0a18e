"""Certified cutoffs: candidates within the low-precision error of the top_n boundary are re-scored in
FP32, so the served top-n set is FP32's (brute force against FP32's own ranking)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from steadyrank.metrics import rank_order
from steadyrank.retrieval.ranking import Cutoff, near_cutoff, rank, rank_async
from steadyrank.serve.runtime import ModelSettings, calibrated, load_scorer
from steadyrank.serve.runtime.precision_calibration import CACHE_FILE, error_bound


def injected(rng: np.random.Generator, n: int, error: float) -> tuple[np.ndarray, np.ndarray]:
    """A stand-in model: FP32 keys, and low-precision keys with a known injected error in [−error, error]."""
    fp32 = rng.normal(0.0, 1.0, n)
    return fp32, fp32 + rng.uniform(-error, error, n)


def test_near_cutoff_is_the_block_within_twice_the_margin() -> None:
    s = np.array([5.0, 4.0, 3.1, 3.0, 2.95, 2.0])
    assert near_cutoff(s, 3, 0.0) == (3, 3)  # 3.1 vs 3.0: apart
    assert near_cutoff(s, 3, 0.05) == (2, 4)  # |3.1 − 3.0| ≤ 0.1
    assert near_cutoff(s, 3, 0.1) == (2, 5)  # 2.95 ≥ 3.1 − 0.2
    assert near_cutoff(s, 3, 0.6) == (1, 6)  # 4.0 ≤ 3.0 + 1.2 and 2.0 ≥ 3.1 − 1.2
    assert near_cutoff(np.array([1.0, 1.0, 1.0]), 1, 0.0) == (0, 3)  # an exact tie is the ε = 0 block


def test_certified_top_n_equals_fp32_top_n_brute_force() -> None:
    """Over many random lists with an injected error ε, the certified top-n set always equals FP32's;
    without certification it often does not (the test can tell them apart)."""
    rng = np.random.default_rng(7)
    error, top_n, differ_plain = 0.05, 10, 0
    for _ in range(400):
        fp32, low = injected(rng, 60, error)
        truth = set(rank_order(fp32)[:top_n].tolist())
        calls: list[np.ndarray] = []

        def rescore(indices: np.ndarray, fp32: np.ndarray = fp32, calls: list = calls) -> np.ndarray:
            calls.append(indices)
            return fp32[indices]

        out = rank(low, top_n, rescore, Cutoff(error, max_rescore=60))
        assert out.certified is True
        assert set(out.order[:top_n].tolist()) == truth
        assert sorted(out.order.tolist()) == list(range(60))  # a permutation
        assert out.near_rescored == sum(c.size for c in calls)  # no exact ties in continuous keys
        plain = rank(low, top_n, rescore)
        differ_plain += set(plain.order[:top_n].tolist()) != truth
    assert differ_plain > 20


def test_only_the_block_is_rescored_and_moved() -> None:
    keys = np.array([0.90, 0.52, 0.50, 0.10, 0.49, 0.70])
    fp32 = {1: 0.48, 2: 0.51, 4: 0.53}
    seen: list[list[int]] = []

    def rescore(indices: np.ndarray) -> np.ndarray:
        seen.append(indices.tolist())
        return np.array([fp32[int(i)] for i in indices])

    out = rank(keys, 3, rescore, Cutoff(0.02, max_rescore=5))
    # ranked 0 (.9), 5 (.7), 1 (.52) | 2 (.50), 4 (.49), 3 (.1): within 0.04 of the cut: 1, 2, 4
    assert seen == [[1, 2, 4]]
    assert out.order.tolist() == [0, 5, 4, 2, 1, 3]
    assert (out.certified, out.rescored, out.near_rescored, out.tie_at_cutoff) == (True, 0, 3, False)


def test_a_block_over_the_cap_is_not_rescored_and_uncertified() -> None:
    keys = np.array([0.50, 0.51, 0.52, 0.53, 0.54, 0.0])

    def rescore(indices: np.ndarray) -> np.ndarray:
        raise AssertionError(f"re-scored {indices} past the cap")

    out = rank(keys, 2, rescore, Cutoff(0.1, max_rescore=4))
    assert (out.certified, out.near_rescored, out.rescored) == (False, 0, 0)
    assert out.order.tolist() == [4, 3, 2, 1, 0, 5]


def test_exact_ties_are_still_settled_when_the_block_is_over_the_cap() -> None:
    keys = np.array([0.5, 0.5, 0.6, 0.7, 0.0])
    out = rank(keys, 3, lambda idx: np.array([0.1, 0.2]), Cutoff(0.2, max_rescore=3))
    assert (out.certified, out.rescored, out.order[:3].tolist()) == (False, 2, [3, 2, 1])


@pytest.mark.parametrize("top_n", [None, 5, 8])
def test_no_cut_is_certified_without_work(top_n: int | None) -> None:
    out = rank(np.array([0.1, 0.1, 0.2, 0.3, 0.4]), top_n, None, Cutoff(1.0, max_rescore=0))
    assert (out.certified, out.near_rescored) == (True, 0)


def test_no_certification_asked_reports_none() -> None:
    assert rank(np.array([0.3, 0.2, 0.1]), 1, None).certified is None


def test_rank_async_rescores_the_same_block_once() -> None:
    rng = np.random.default_rng(3)
    fp32, low = injected(rng, 40, 0.1)
    asked: list[list[int]] = []

    async def rescore(indices: np.ndarray) -> np.ndarray:
        asked.append(indices.tolist())
        return fp32[indices]

    cutoff = Cutoff(0.1, max_rescore=40)
    out = asyncio.run(rank_async(low, 5, rescore, cutoff))
    sync = rank(low, 5, lambda idx: fp32[idx], cutoff)
    assert len(asked) == 1 and len(asked[0]) == out.near_rescored + out.rescored
    assert out.order.tolist() == sync.order.tolist() and out.certified is True
    assert set(out.order[:5].tolist()) == set(rank_order(fp32)[:5].tolist())


def test_error_bound_fits_on_even_queries_and_checks_on_odd() -> None:
    reference = [np.zeros(3), np.zeros(2), np.zeros(2)]
    keys = [np.array([0.1, -0.3, 0.0]), np.array([0.2, 0.5]), np.array([-0.2, 0.3])]
    bound = error_bound(keys, reference)
    # fit: queries 0 and 2 (max 0.3); check: query 1 (0.2 within, 0.5 not)
    assert (bound.bound, bound.coverage, bound.fit_pairs, bound.check_pairs) == (pytest.approx(0.3), 0.5, 5, 2)
    with pytest.raises(ValueError, match="two or more"):
        error_bound(keys[:1], reference[:1])


def demo_passages(n: int) -> tuple[str, list[str]]:
    """The bundled demo set's first golden query and its first ``n`` corpus passages."""
    demo = resources.files("steadyrank.serve") / "data" / "demo"
    corpus = [json.loads(line) for line in (demo / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line]
    golden = json.loads((demo / "golden.jsonl").read_text(encoding="utf-8").splitlines()[0])
    return golden["query"], [doc["text"] for doc in corpus[:n]]


def test_bf16_bound_is_measured_on_the_calibration_set_and_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real all-MiniLM-L6-v2 (as a bi-encoder reranker) in BF16: its bound is measured once
    (BF16 keys against the FP32 twin's on the calibration set), cached, and read back."""
    cache = tmp_path / CACHE_FILE
    settings = ModelSettings(precision="bf16", certify_cutoffs=True, certify_max_rescore=9)
    scorer = load_scorer(settings, calibration=cache)
    assert scorer.error_bound is not None and scorer.cutoff is not None
    assert scorer.cutoff == Cutoff(scorer.error_bound.bound, 9) and 0 < scorer.error_bound.bound < 0.05
    assert 0.0 <= scorer.error_bound.coverage <= 1.0 and scorer.error_bound.check_pairs > 0
    cached = [m["error"] for entry in json.loads(cache.read_text()).values() for m in entry["measurements"]]
    assert cached == [asdict(scorer.error_bound)]

    def measured_again(_: object) -> None:
        raise AssertionError("the cached bound was measured again")

    monkeypatch.setattr(calibrated, "measure_error", measured_again)
    again = load_scorer(settings, calibration=cache)
    assert again.error_bound == scorer.error_bound
    for off in (settings.model_copy(update={"certify_cutoffs": False}),
                settings.model_copy(update={"precision": "fp32"})):
        assert load_scorer(off, calibration=cache).cutoff is None  # not asked, or nothing to certify


def test_certified_bf16_top_n_equals_fp32_top_n() -> None:
    """The real all-MiniLM-L6-v2 in BF16 (keys from one BF16 pass), with the margin at its measured
    error on these passages and FP32 re-scores from its FP32 twin: every top-n set equals FP32's;
    without certification some do not."""
    query, docs = demo_passages(60)
    pairs = [(query, d) for d in docs]
    low = load_scorer(ModelSettings(precision="bf16"))
    low_keys = low.score(pairs).keys
    fp32_keys = low.fp32_keys(pairs)
    margin = float(np.abs(low_keys.astype(np.float64) - fp32_keys).max()) * 1.01
    cutoff = Cutoff(margin, max_rescore=len(docs))
    differ, rescored = 0, 0
    for top_n in range(1, len(docs)):
        truth = set(rank_order(fp32_keys)[:top_n].tolist())
        out = rank(low_keys, top_n, lambda idx: low.fp32_keys([pairs[i] for i in idx]), cutoff)
        assert out.certified is True
        assert set(out.order[:top_n].tolist()) == truth, top_n
        differ += set(rank_order(low_keys)[:top_n].tolist()) != truth
        rescored += out.near_rescored + out.rescored
    assert differ > 0
    assert rescored < len(docs) * len(docs) / 8  # narrow blocks: far less than re-scoring every list whole


def test_served_reranker_reports_and_counts_the_certified_cutoff() -> None:
    """The real Reranker deployment class in-process (no Ray), the real MiniLM in BF16 with a margin
    wide enough to put every candidate near the cutoff: meta and the counters say what happened."""
    from steadyrank.serve.server.components.metrics_hub import MetricsHub
    from steadyrank.serve.server.components.reranker import Reranker
    from steadyrank.serve.settings import load_settings
    from tests.serve.conftest import parse_metrics

    query, docs = demo_passages(6)
    store = MetricsHub().store
    wide = ModelSettings(precision="bf16", certify_cutoffs=True, score_error_bound=10.0, certify_max_rescore=6)
    deployment = Reranker(load_settings({}), wide.model_dump(), "primary", store)
    certified = asyncio.run(deployment.rerank(query, docs, top_n=2))
    assert certified.tie_facts()["cutoff_certified"] is True and certified.near_rescored + certified.rescored == 6
    narrow = Reranker(load_settings({}), wide.model_copy(update={"certify_max_rescore": 5}).model_dump(),
                      "primary", store)
    uncertified = asyncio.run(narrow.rerank(query, docs, top_n=2))
    assert (uncertified.cutoff_certified, uncertified.near_rescored) == (False, 0)  # over the cap: no work
    for recorder in (deployment.recorder, narrow.recorder):
        recorder.flush()
    series = parse_metrics(store.render().decode())
    counts = {name: series.get((name, ()), 0.0) for name in ("steadyrank_cutoff_checks_total",
                                                           "steadyrank_cutoff_uncertified_total",
                                                           "steadyrank_cutoff_rescored_total")}
    assert counts == {"steadyrank_cutoff_checks_total": 2, "steadyrank_cutoff_uncertified_total": 1,
                      "steadyrank_cutoff_rescored_total": certified.near_rescored}

"""The optional hygiene stages (retrieval.hygiene) against brute force and hand computation, and
their place in the pipeline (retrieval.pipeline): suppressed near-duplicates are not reranked and
are served last; the lexical boost adds ``w · overlap`` to the FP32 keys, the boundary re-score
included; both stages time themselves; the suppression's size limit holds before any retrieval.

The reranker is a stand-in (a score per text from a table): the stages' arithmetic is what is tested."""

from __future__ import annotations

import asyncio
import itertools
import math

import numpy as np
import pytest

from steadyrank.retrieval.candidate_pool import CandidatePool
from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.hygiene import (
    DEDUP_MAX_CANDIDATES,
    Hygiene,
    boosted_keys,
    near_duplicates,
    query_term_overlap,
)
from steadyrank.retrieval.pipeline import PassScores, SearchModels, search
from steadyrank.retrieval.routing import RoutingSettings


def _brute_force(vectors: np.ndarray, threshold: float) -> tuple[list[int], dict[int, int]]:
    """The docstring's greedy rule, one pair at a time with exact sums (math.fsum)."""
    rows = [[float(x) for x in v] for v in vectors]
    kept: list[int] = []
    representative: dict[int, int] = {}
    for j, v in enumerate(rows):
        similar = [(math.fsum(a * b for a, b in zip(rows[i], v, strict=True)), i) for i in kept]
        above = [(s, i) for s, i in similar if s >= threshold]
        if above:
            best = max(s for s, _ in above)
            representative[j] = min(i for s, i in above if s == best)  # equal similarity: the earlier one
        else:
            kept.append(j)
    return kept, representative


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def _with_near_copies(rng: np.random.Generator, n: int, dim: int, copies: int, noise: float) -> np.ndarray:
    base = rng.standard_normal((n, dim))
    sources = rng.integers(0, n, size=copies)
    near = base[sources] + noise * rng.standard_normal((copies, dim))
    rows = np.concatenate([base, near])
    return _unit(rows[rng.permutation(len(rows))])


@pytest.mark.parametrize(("seed", "threshold"), list(itertools.product(range(6), (0.5, 0.9, 0.97))))
def test_suppression_equals_brute_force(seed: int, threshold: float) -> None:
    vectors = _with_near_copies(np.random.default_rng(seed), 40, 16, 15, 0.15)
    found = near_duplicates(vectors, threshold)
    kept, representative = _brute_force(vectors, threshold)
    assert found.kept.tolist() == kept
    assert dict(zip(found.suppressed.tolist(), found.representative.tolist(), strict=True)) == representative


def test_suppression_picks_exactly_the_copies_above_the_threshold() -> None:
    """Five well-separated passages, each followed later by copies at known cosines: a copy is
    suppressed exactly when its cosine with its source is ≥ the threshold."""
    dim = 12
    eye = np.eye(dim)
    sources = eye[:5]
    cosines = {5: 0.99, 6: 0.95, 7: 0.90, 8: 0.999, 9: 0.80}  # copy index → cosine with source (index − 5)
    copies = [c * sources[i - 5] + math.sqrt(1 - c * c) * eye[5 + i - 5] for i, c in cosines.items()]
    vectors = np.concatenate([sources, np.array(copies)]).astype(np.float32)
    for threshold in (0.85, 0.92, 0.97, 0.995):
        found = near_duplicates(vectors, threshold)
        expected = [i for i, c in cosines.items() if c >= threshold + 1e-6]  # float32 rounding aside
        assert found.suppressed.tolist() == expected, threshold
        assert found.representative.tolist() == [i - 5 for i in expected]


def test_ties_go_to_the_earlier_candidate_and_the_threshold_is_inclusive() -> None:
    a = np.array([1.0, 0.0, 0.0], np.float32)
    b = np.array([0.0, 1.0, 0.0], np.float32)
    between = _unit(np.array([[1.0, 1.0, 0.0]]))[0]  # cosine 1/√2 with a and with b, exactly equal
    found = near_duplicates(np.stack([a, b, between, a]), float(np.float64(between[0])))
    assert found.kept.tolist() == [0, 1]
    assert found.suppressed.tolist() == [2, 3]
    assert found.representative.tolist() == [0, 0]  # equal similarity → the earlier kept candidate
    # exactly at the threshold counts (≥): 0.6 and 0.8 as float32, cosine = their float32 0.6 · 1
    x = np.array([[1.0, 0.0], [0.6, 0.8]], np.float32)
    assert near_duplicates(x, float(x[1, 0])).suppressed.tolist() == [1]
    assert near_duplicates(x, float(np.nextafter(np.float64(x[1, 0]), 2.0))).suppressed.tolist() == []


def test_a_suppressed_candidate_never_suppresses_another() -> None:
    """a ≈ b, b ≈ c but a and c apart: b is suppressed by a, c is kept (b no longer counts)."""
    angles = np.radians([0.0, 20.0, 40.0])
    vectors = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    found = near_duplicates(vectors, math.cos(math.radians(25)))
    assert found.kept.tolist() == [0, 2]
    assert found.suppressed.tolist() == [1]


def test_overlap_by_hand() -> None:
    """Query terms after the BM25 analysis: run, dog, park (in, the: stopwords)."""
    overlap = query_term_overlap("Running dogs in the park", ["A dog runs", "the", "parks and running DOGS", ""])
    assert overlap.tolist() == [2 / 3, 0.0, 1.0, 0.0]
    assert query_term_overlap("the of", ["the of x"]).tolist() == [0.0]  # a query of stopwords only
    assert query_term_overlap("dogs", []).shape == (0,)


def test_boosted_keys_by_hand() -> None:
    keys = np.array([1.5, -0.25, 0.125], np.float32)
    out = boosted_keys(keys, np.array([1 / 3, 1.0, 0.0]), 0.75)
    assert out.dtype == np.float32
    assert out.tolist() == [np.float32(1.5 + 0.25), np.float32(0.5), np.float32(0.125)]


@pytest.mark.parametrize("bad", [{"dedup_threshold": 1.5}, {"dedup_threshold": -2.0}, {"boost_weight": -0.1},
                                 {"boost_weight": float("inf")}, {"boost_weight": float("nan")}])
def test_invalid_hygiene_is_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        Hygiene(**bad)


# -- in the pipeline ------------------------------------------------------------------------------

TEXTS = {"d0": "dog park rules", "d1": "dog park rules!", "d2": "cats sleep", "d3": "a dog", "d4": "park map"}
SCORE = {"d0": 2.0, "d1": 2.0, "d2": 1.0, "d3": 0.5, "d4": 0.5}  # the reranker's FP32 keys (a stand-in)
ANGLES = {"d0": 0.0, "d1": 1.0, "d2": 60.0, "d3": 120.0, "d4": 180.0}  # d1 is a near-copy of d0 (cos 0.99985)


class StandIn:
    """A pool of the five documents in this order, their vectors at ``ANGLES``; scores from ``SCORE``;
    records every call."""

    def __init__(self) -> None:
        self.scored: list[list[str]] = []
        self.rescored: list[list[str]] = []
        self.retrieved = 0

    async def retrieve(self, query: str, vector: np.ndarray | None, mode: str, depth: int,
                       with_vectors: bool) -> CandidatePool:
        self.retrieved += 1
        ids = list(TEXTS)[:depth]
        angles = np.radians([ANGLES[d] for d in ids])
        vectors = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
        return CandidatePool(ids, np.linspace(1.0, 0.5, len(ids)), [Document(d, TEXTS[d]) for d in ids], None, None,
                             {}, vectors if with_vectors else None)

    async def score(self, query: str, texts: list[str]) -> PassScores:
        self.scored.append(texts)
        keys = np.array([SCORE[_id(t)] for t in texts], np.float32)
        return PassScores(keys, keys)

    async def fp32_keys(self, query: str, texts: list[str]) -> np.ndarray:
        self.rescored.append(texts)
        return np.array([SCORE[_id(t)] for t in texts], np.float32)  # still tied: the boost decides

    def models(self) -> SearchModels:
        return SearchModels(retrieve=self.retrieve, score=self.score, fp32_keys=self.fp32_keys)


def _id(text: str) -> str:
    return next(d for d, t in TEXTS.items() if t == text)


def _run(standin: StandIn, hygiene: Hygiene, top_n: int = 5):
    settings = RoutingSettings(k_low=5, k_high=5, top_n=top_n)
    return asyncio.run(search("dog park", "bm25", standin.models(), settings, "fixed50", hygiene=hygiene))


def test_off_by_default_nothing_changes() -> None:
    standin = StandIn()
    ranked = _run(standin, Hygiene())
    assert ranked.doc_ids == ["d0", "d1", "d2", "d3", "d4"]
    assert "dedup" not in ranked.timings and "boost" not in ranked.timings
    assert ranked.demoted == {} and ranked.overlap is None


def test_a_suppressed_near_duplicate_is_not_reranked_and_is_served_last() -> None:
    standin = StandIn()
    ranked = _run(standin, Hygiene(dedup_threshold=0.999))
    assert standin.scored == [["dog park rules", "cats sleep", "a dog", "park map"]]  # d1 never reaches the reranker
    assert ranked.doc_ids == ["d0", "d2", "d3", "d4", "d1"]
    assert ranked.demoted == {"d1": "d0"}
    assert ranked.scores.tolist() == [2.0, 1.0, 0.5, 0.5, -0.5]  # min(keys) − 1
    assert list(np.argsort(-ranked.scores, kind="stable")) == list(range(5))  # scores sort to the served order
    assert {"retrieve", "dedup", "rerank", "route"} <= set(ranked.timings)


def test_the_boost_adds_weight_times_overlap_to_the_keys() -> None:
    standin = StandIn()
    ranked = _run(standin, Hygiene(boost_weight=0.5))
    overlap = np.array([1.0, 1.0, 0.0, 0.5, 0.5])  # query terms dog, park
    assert ranked.overlap is not None and ranked.overlap.tolist() == overlap.tolist()
    expected = (np.array([2.0, 2.0, 1.0, 0.5, 0.5]) + 0.5 * overlap).astype(np.float32)
    assert ranked.rerank_keys.tolist() == expected.tolist()
    assert ranked.rerank_scores.tolist() == [2.0, 2.0, 1.0, 0.5, 0.5]  # the reranker's scores, unboosted
    # d2 (1.0) stays above d3, d4 (0.75); d0, d1 tied at 2.5 keep retrieval order
    assert ranked.doc_ids == ["d0", "d1", "d2", "d3", "d4"]
    assert "boost" in ranked.timings


def test_the_boost_can_reorder_and_the_boundary_rescore_is_boosted_alike() -> None:
    """Weight 2: d3/d4 reach 0.5 + 2 · 0.5 = 1.5 > d2's 1.0. With top_n 1 the tie d0 = d1 (2 + 2 = 4)
    straddles the cutoff: both are re-scored in FP32 (still 2.0 each) and the boost is added again
    (4.0 each), so the tie is reported as unsettled and retrieval order kept."""
    standin = StandIn()
    ranked = _run(standin, Hygiene(boost_weight=2.0), top_n=1)
    assert ranked.doc_ids == ["d0", "d1", "d3", "d4", "d2"]
    assert standin.rescored == [["dog park rules", "dog park rules!"]]
    assert ranked.ranking is not None and ranked.ranking.tie_at_cutoff and ranked.ranking.rescored == 2


def test_boosted_keys_that_become_equal_are_tied_in_retrieval_order() -> None:
    """Weight 1: d2 (1.0 + 0), d3 and d4 (0.5 + 0.5) all reach 1.0: one tie group, retrieval order."""
    ranked = _run(StandIn(), Hygiene(boost_weight=1.0))
    assert ranked.rerank_keys.tolist() == [3.0, 3.0, 1.0, 1.0, 1.0]
    assert ranked.doc_ids == ["d0", "d1", "d2", "d3", "d4"]
    assert ranked.ranking is not None
    assert [g.tolist() for g in ranked.ranking.tie_groups] == [[0, 1], [2, 3, 4]]


def test_the_boost_changes_which_candidates_straddle_the_cutoff() -> None:
    """Without the boost d3 and d4 tie at 0.5 across top_n 4; with weight 2 they reach 1.5 and d2
    (overlap 0) falls below them: no tie at the cutoff any more."""
    plain = _run(StandIn(), Hygiene(), top_n=4)
    assert plain.ranking is not None and plain.ranking.tie_group_size_at_cutoff == 2
    boosted = _run(StandIn(), Hygiene(boost_weight=2.0), top_n=4)
    assert boosted.ranking is not None and boosted.ranking.tie_group_size_at_cutoff == 0
    assert boosted.doc_ids[:4] == ["d0", "d1", "d3", "d4"]


def test_both_stages_together_and_their_timings() -> None:
    standin = StandIn()
    ranked = _run(standin, Hygiene(dedup_threshold=0.999, boost_weight=2.0))
    assert ranked.doc_ids == ["d0", "d3", "d4", "d2", "d1"]
    assert list(ranked.timings)[:2] == ["retrieve", "dedup"]
    assert {"dedup", "boost", "rerank", "route"} <= set(ranked.timings)


def test_without_a_reranker_suppression_applies_and_the_boost_is_refused() -> None:
    standin = StandIn()
    models = SearchModels(retrieve=standin.retrieve)
    settings = RoutingSettings(k_low=5, k_high=5, top_n=5)
    ranked = asyncio.run(search("dog park", "bm25", models, settings, hygiene=Hygiene(dedup_threshold=0.999)))
    assert ranked.doc_ids == ["d0", "d2", "d3", "d4", "d1"]
    assert ranked.scores[-1] < ranked.scores[-2]
    with pytest.raises(ValueError, match="needs a reranker"):
        asyncio.run(search("dog park", "bm25", models, settings, hygiene=Hygiene(boost_weight=1.0)))


def test_suppression_over_too_many_candidates_is_refused_before_retrieval() -> None:
    standin = StandIn()
    settings = RoutingSettings(k_low=10, k_high=DEDUP_MAX_CANDIDATES + 1, top_n=5)
    with pytest.raises(ValueError, match=f"at most {DEDUP_MAX_CANDIDATES}"):
        asyncio.run(search("q", "bm25", standin.models(), settings, hygiene=Hygiene(dedup_threshold=0.9)))
    assert standin.retrieved == 0
    with pytest.raises(ValueError, match=f"at most {DEDUP_MAX_CANDIDATES}"):
        near_duplicates(np.zeros((DEDUP_MAX_CANDIDATES + 1, 2), np.float32), 0.9)


def test_the_largest_allowed_suppression_holds_its_memory() -> None:
    """At the limit (1,000 candidates × 384 dims, the bundled embedder's) the similarity matrix is
    the work's only n² term: 8 MB of float64. Measured with tracemalloc, the peak stays under 32 MB."""
    import tracemalloc

    vectors = _unit(np.random.default_rng(0).standard_normal((DEDUP_MAX_CANDIDATES, 384)))
    tracemalloc.start()
    try:
        found = near_duplicates(vectors, 0.99)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found.kept.size == DEDUP_MAX_CANDIDATES  # random directions in 384-d: none near another
    assert peak < 32 * 2**20, peak

"""The padded-arrays API gives exactly what the dictionary API gives."""

from __future__ import annotations

import numpy as np
import pytest

from steadyrank.metrics import evaluate, evaluate_arrays
from tests.metrics import reference


def test_arrays_equal_dicts_on_ragged_bf16_like_scores():
    rng = np.random.default_rng(7)
    n_queries, width = 40, 30
    lengths = rng.integers(1, width + 1, size=n_queries)
    scores = np.round(rng.random((n_queries, width)) * 8) / 8  # 9 distinct values: heavy ties
    grades = rng.integers(0, 4, size=(n_queries, width)) * (rng.random((n_queries, width)) < 0.3)
    judged = np.full((n_queries, width + 2), np.nan)
    run, qrels = {}, {}
    for q in range(n_queries):
        docs = [f"d{j}" for j in range(lengths[q])]
        run[str(q)] = {d: float(scores[q, j]) for j, d in enumerate(docs)}
        qrels[str(q)] = {d: float(grades[q, j]) for j, d in enumerate(docs) if grades[q, j] > 0}
        qrels[str(q)]["unretrieved"] = 2.0
        pool = list(qrels[str(q)].values())
        judged[q, : len(pool)] = pool
    measures = ["ndcg@10", "mrr@10", "map@20", "recall@5", "err@10", "ra_nwg@10", "harm@5"]
    rubric = {0: 1, 1: 3, 2: 4, 3: 5}
    by_dict = evaluate(run, qrels, measures, rubric_map=rubric, gmax=3)
    by_array = evaluate_arrays(scores, grades, judged, measures, lengths=lengths, rubric_map=rubric, gmax=3)
    for m in measures:
        for stat in ("expected", "min", "max", "oblivious", "proc"):
            np.testing.assert_allclose(by_array[m].stat(stat), by_dict[m].stat(stat), rtol=0, atol=1e-12)


def test_non_finite_scores_are_refused_in_full_and_ragged_rows():
    """The engine's first stage checks full rows block by block; ragged rows are checked up front."""
    judged = np.full((3, 1), np.nan)
    for bad in (np.nan, np.inf, -np.inf):
        scores = np.ones((3, 1030), dtype=np.float32)
        scores[2, 1029] = bad
        with pytest.raises(ValueError, match="scores must be finite"):
            evaluate_arrays(scores, np.zeros(scores.shape), judged, ["ndcg@5"])
        with pytest.raises(ValueError, match="scores must be finite"):
            evaluate_arrays(scores, np.zeros(scores.shape), judged, ["ndcg@5"], lengths=np.array([1030, 1030, 1030]))
    finite = np.full((2, 3), np.finfo(np.float32).max, dtype=np.float32)  # the sum overflows; every score is finite
    assert evaluate_arrays(finite, np.zeros(finite.shape), np.full((2, 1), np.nan), ["hits@2"]).query_ids == ["0", "1"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_non_finite_scores_are_refused_wherever_they_sit_in_a_row(dtype):
    """The full-row check reads each row's minimum and its top K after the partition: NaN and +inf
    anywhere (more of them than K included, and beyond the first block of rows) and -inf anywhere are
    refused; rows at the extremes of the finite range are accepted."""
    rng = np.random.default_rng(7)
    n_rows, width, k = 1100, 40, 5
    for _ in range(30):
        scores = rng.normal(size=(n_rows, width)).astype(dtype)
        row = int(rng.integers(n_rows))
        count = int(rng.integers(1, width + 1))
        scores[row, rng.choice(width, size=count, replace=False)] = rng.choice([np.nan, np.inf, -np.inf], size=count)
        with pytest.raises(ValueError, match="scores must be finite"):
            evaluate_arrays(scores, np.zeros(scores.shape), np.full((n_rows, 1), np.nan), [f"ndcg@{k}"])
    extreme = np.finfo(dtype)
    finite = rng.choice([extreme.max, -extreme.max, extreme.tiny, 0.0], size=(n_rows, width)).astype(dtype)
    assert len(evaluate_arrays(finite, np.zeros(finite.shape), np.full((n_rows, 1), np.nan), [f"ndcg@{k}"]).query_ids) == n_rows


def test_fixed_order_reciprocal_rank_against_the_reference():
    """RR of a fixed order (the oblivious value, and E/min/max where no tie touches a relevant item)
    against the brute-force reference on the input-order ranking: no relevant item, every item
    relevant, the first relevant item at each rank, ties straddling the cutoff, all scores tied, and
    a cutoff beyond the row (k > n)."""
    rng = np.random.default_rng(11)
    n_queries, width = 400, 12
    scores = np.round(rng.random((n_queries, width)) * 4) / 4  # 5 distinct values: ties across every cutoff
    scores[:40] = 0.5  # all tied
    grades = (rng.random((n_queries, width)) < 0.15) * rng.integers(1, 4, size=(n_queries, width))
    grades[40:60] = 0  # nothing relevant
    grades[60:80] = 2  # everything relevant
    for q in range(80, 80 + width):  # the first relevant item at each input position
        grades[q] = 0
        grades[q, q - 80] = 1
    judged = np.where(grades > 0, grades, np.nan).astype(np.float64)
    judged[:, 0] = np.where(np.isnan(judged[:, 0]), 1.0, judged[:, 0])  # every query has N+ > 0
    for k in (1, 3, width, width + 5):
        result = evaluate_arrays(scores, grades, judged, [f"mrr@{k}"])[f"mrr@{k}"]
        for q in range(n_queries):
            ranked = grades[q][np.argsort(-scores[q], kind="stable")]
            pool = judged[q][~np.isnan(judged[q])]
            assert result.oblivious[q] == reference.metric("mrr", k, ranked.tolist(), pool.tolist())

"""The padded-arrays API gives exactly what the dictionary API gives."""

from __future__ import annotations

import numpy as np
import pytest

from steadyrank.metrics import evaluate, evaluate_arrays


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

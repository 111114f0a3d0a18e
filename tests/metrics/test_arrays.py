"""The padded-arrays API gives exactly what the dictionary API gives."""

from __future__ import annotations

import numpy as np

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

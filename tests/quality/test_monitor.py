"""Evaluator figures equal metrics/ on the same inputs; windows keep the last N per variant."""

from __future__ import annotations

import math

import numpy as np
import pytest

from steadyrank.metrics import evaluate
from steadyrank.serve.server.quality.golden_sets import RELEVANCE_TO_RUBRIC, GoldenQuery
from steadyrank.serve.server.quality.monitor import GOLDEN_MEASURES, QualityWindow, evaluate_ranking

GOLDEN = GoldenQuery("q1", "how to list open ports", {"d1": 5, "d2": 4, "d3": 3, "d4": 2, "d9": 5})
# d2 and d3 tie across rank 10 with two unjudged documents.
CANDIDATES = [("d1", 0.9)] + [(f"u{i}", 0.8 - i / 100) for i in range(7)] + [("d2", 0.5), ("x", 0.5), ("d3", 0.5), ("d4", 0.1)]


def test_evaluation_equals_metrics_evaluate():
    e = evaluate_ranking(GOLDEN, CANDIDATES, variant="primary", source="replay", escalated=True, latency_s=0.2)
    direct = evaluate({"q1": dict(CANDIDATES)}, {"q1": {"d1": 3, "d2": 2, "d3": 1, "d4": 0, "d9": 3}},
                      GOLDEN_MEASURES, rel_level=1, gmax=3, rubric_map=RELEVANCE_TO_RUBRIC)
    for measure in GOLDEN_MEASURES:
        for stat in ("expected", "min", "max", "oblivious", "proc"):
            assert e.stats[measure][stat] == pytest.approx(direct[measure].stat(stat)[0], nan_ok=True)
    assert e.tie_at_cutoff and e.tie_group_size == 3
    assert e.stats["ndcg@10"]["range"] > 0
    assert e.escalated and e.k == len(CANDIDATES)


def _query(i: int) -> GoldenQuery:
    return GoldenQuery(f"q{i}", f"query {i}", GOLDEN.judgments)


def test_window_keeps_the_last_n_distinct_queries_and_averages_defined_values():
    window = QualityWindow(size=3)
    for i in range(5):
        cands = [("d1", 1.0), ("x", 0.5)] if i % 2 else [("x", 1.0), ("d1", 0.5)]
        window.add(evaluate_ranking(_query(i), cands, variant="primary", source="replay", latency_s=i))
    summary = window.summary("primary")
    assert summary.n == 3
    # the last three queries: q2 (d1 second), q3 (first), q4 (second) → MRR mean (0.5 + 1 + 0.5) / 3
    assert summary.quality["mrr@10"]["expected"] == pytest.approx(2 / 3)
    assert summary.latency_p50_s == 3
    assert window.variants() == ["primary"]
    assert math.isnan(window.summary("canary").quality["ndcg@10"]["expected"])


def test_a_repeat_refreshes_its_query_and_keeps_its_latest_replay():
    """A query evaluated again replaces its entry (and becomes the newest), it never adds one; the
    entry keeps the latest replay for the canary's pairs."""
    window = QualityWindow(size=2)
    first, second = [("d1", 1.0), ("x", 0.5)], [("x", 1.0), ("d1", 0.5)]
    window.add(evaluate_ranking(_query(0), first, variant="primary", source="replay"))
    window.add(evaluate_ranking(_query(1), first, variant="primary", source="replay"))
    for _ in range(50):
        window.add(evaluate_ranking(_query(0), second, variant="primary", source="mirror"))
    assert [e.query_id for e in window.evaluations("primary")] == ["q1", "q0"]
    assert window.summary("primary").quality["mrr@10"]["expected"] == pytest.approx((1 + 0.5) / 2)
    assert [(e.query_id, e.source) for e in window.replays("primary")] == [("q1", "replay"), ("q0", "replay")]
    assert window.composition("primary") == {"queries": 2, "evaluations": 52, "repeats_refreshed": 50,
                                             "by_source": {"replay": 1, "mirror": 1}, "replayed": 2}
    window.add(evaluate_ranking(_query(2), first, variant="primary", source="mirror"))  # q1, least recent, leaves
    assert [e.query_id for e in window.evaluations("primary")] == ["q0", "q2"]
    assert [e.query_id for e in window.replays("primary")] == ["q0"]
    assert window.composition("primary")["evaluations"] == 52  # q0's 51 and q2's 1


def test_bad_rankings_are_refused():
    with pytest.raises(ValueError, match="duplicate"):
        evaluate_ranking(GOLDEN, [("d1", 1.0), ("d1", 0.5)], variant="p", source="replay")
    with pytest.raises(ValueError, match="empty"):
        evaluate_ranking(GOLDEN, [], variant="p", source="replay")
    assert np.isfinite(evaluate_ranking(GOLDEN, [("zz", 1.0)], variant="p", source="replay").stats["harm@10"]["expected"])

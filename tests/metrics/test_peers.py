"""Agreement with peers: pytrec_eval (trec_eval's docid tie-break) and the TRM reference package."""

from __future__ import annotations

import numpy as np
import pytest
import pytrec_eval
import trm
from hypothesis import given, settings
from hypothesis import strategies as st

from steadyrank.metrics import evaluate


@st.composite
def tied_runs(draw):
    """Several queries with heavily tied scores, graded qrels and some judged docs not retrieved."""
    run, qrels = {}, {}
    for q in range(draw(st.integers(1, 5))):
        n = draw(st.integers(1, 25))
        scores = draw(st.lists(st.sampled_from([0.25, 0.5, 0.75, 1.0, 2.0]), min_size=n, max_size=n))
        grades = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
        docids = draw(
            st.lists(st.text("abcdef0123456789", min_size=1, max_size=4), min_size=n, max_size=n, unique=True)
        )
        run[f"q{q}"] = dict(zip(docids, scores, strict=True))
        qrels[f"q{q}"] = {d: g for d, g in zip(docids, grades, strict=True)}
        qrels[f"q{q}"].update({f"missing{i}": g for i, g in enumerate(draw(st.lists(st.integers(1, 3), max_size=3)))})
    return run, qrels


@settings(max_examples=80, deadline=None)
@given(tied_runs(), st.sampled_from([1, 3, 5, 10, 20]), st.sampled_from([1, 2]))
def test_oblivious_docid_matches_pytrec_eval(case, k, rel_level):
    run, qrels = case
    names = {
        f"ndcg_cut_{k}": f"ndcg@{k}", f"map_cut_{k}": f"map@{k}",
        f"recall_{k}": f"recall@{k}", f"P_{k}": f"precision@{k}",
    }
    evaluator = pytrec_eval.RelevanceEvaluator(
        {q: {d: int(g) for d, g in j.items()} for q, j in qrels.items()},
        {f"{m}.{k}" for m in ("ndcg_cut", "map_cut", "recall", "P")}, relevance_level=rel_level,
    )
    theirs = evaluator.evaluate(run)
    ours = evaluate(run, qrels, list(names.values()), rel_level=rel_level, tie_break="docid")
    for i, qid in enumerate(ours.query_ids):
        n_relevant = sum(g >= rel_level for g in qrels[qid].values())
        for trec_name, our_name in names.items():
            value = ours[our_name].oblivious[i]
            if n_relevant == 0 and our_name != f"precision@{k}":
                assert np.isnan(value)  # NA by our rule; trec_eval reports 0
                continue
            if our_name.startswith("ndcg") and n_relevant == 0:
                continue
            assert value == pytest.approx(theirs[qid][trec_name], abs=1e-9), (qid, trec_name)


def test_trm_paper_worked_example():
    """The TRM reference's docstring example (a 3-way tie straddling k = 3).

    The package's docstring prints E[Recall@3] = 0.8889, but its own code returns 0.7778, which
    is right: the top 3 hold d3 plus 2 of the tied {d0, d1, d2} (2 of them relevant), N+ = 3.
    """
    scores = [0.97, 0.97, 0.97, 0.99, 0.95]
    relevant = [True, False, True, True, False]
    run = {"q": {f"d{i}": s for i, s in enumerate(scores)}}
    qrels = {"q": {f"d{i}": int(r) for i, r in enumerate(relevant)}}
    stats = evaluate(run, qrels, ["recall@3"])["recall@3"]
    assert stats.expected[0] == pytest.approx((1 + 2 * 2 / 3) / 3, abs=1e-12)
    reference = trm.evaluate([scores], [relevant], metrics=["recall"], k_list=[3]).metrics["recall"][3]
    assert stats.expected[0] == pytest.approx(reference.expected, abs=1e-12)
    assert stats.min[0] == pytest.approx(reference.minimum) and stats.max[0] == pytest.approx(reference.maximum)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from([0.1, 0.2, 0.3]), min_size=1, max_size=12), st.randoms()),
                min_size=1, max_size=4), st.sampled_from([1, 2, 3, 5, 10]))
def test_binary_metrics_match_trm_reference(queries, k):
    """Expected/min/max/oblivious of ndcg, mrr, map, recall, precision, f1, hits equal the TRM package.

    The package counts N+ among the candidates, so the qrels here judge exactly the candidates.
    Its precision/F1 extremes and oblivious value divide by the list length, not by k, when fewer
    than k candidates exist (its own expectation divides by k, as trec_eval does); those cases
    are compared only where the two definitions coincide.
    """
    scores, relevant = [], []
    for q_scores, rnd in queries:
        scores.append(q_scores)
        relevant.append([rnd.random() < 0.4 for _ in q_scores])
    names = ["ndcg", "mrr", "map", "recall", "precision", "f1", "hits"]
    reference = trm.evaluate(scores, relevant, metrics=names, k_list=[k])
    run = {f"q{i}": {f"d{j}": s for j, s in enumerate(qs)} for i, qs in enumerate(scores)}
    qrels = {f"q{i}": {f"d{j}": int(r) for j, r in enumerate(qr)} for i, qr in enumerate(relevant)}
    ours = evaluate(run, qrels, [f"{n}@{k}" for n in names])
    for i in range(len(scores)):
        if not any(relevant[i]):
            continue
        for n in names:
            theirs = reference.per_query[n][k][i]
            mine = ours[f"{n}@{k}"]
            if n in ("precision", "f1") and len(scores[i]) < k:
                assert mine.expected[i] == pytest.approx(theirs.expected, abs=1e-9), n
                continue
            assert mine.expected[i] == pytest.approx(theirs.expected, abs=1e-9), n
            assert mine.max[i] == pytest.approx(theirs.maximum, abs=1e-9), n
            assert mine.min[i] == pytest.approx(theirs.minimum, abs=1e-9), n
            assert mine.oblivious[i] == pytest.approx(theirs.oblivious, abs=1e-9), n

"""The two-stage engine gives the numbers of the engine it replaced, on random inputs with many ties.

The previous engine is read from git (the metrics package at ``PREVIOUS``, the commit before the
rewrite) into a temporary package of its own; both evaluate the same random batches: scores drawn
from three values (ties everywhere, also across the cutoff), mostly unjudged candidates, padded
rows, grade maps, relevance thresholds that make unjudged candidates relevant, both tie-breaks.
"""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steadyrank.metrics import evaluate, evaluate_arrays
from tests.tiers import e2e_fixture

REPO = Path(__file__).resolve().parents[2]
#: main before the two-stage engine: the reference for this test.
PREVIOUS = "56ee40acd7dab56f23931ec782b22863997d5a37"
PREVIOUS_METRICS = ("hits", "recall", "precision", "f1", "ndcg", "ndcg_exp", "mrr", "map", "err", "ra_nwg",
                    "nrecall4", "nrecall5", "precision4", "harm")
STATS = ("expected", "min", "max", "oblivious", "proc")
RUBRIC = {0: 1, 1: 3, 2: 4, 3: 5}


@pytest.fixture(scope="module")
@e2e_fixture  # reads the previous engine with git (a process)
def previous(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """``steadyrank.metrics`` as of PREVIOUS, importable as ``previous_metrics``."""
    if shutil.which("git") is None:
        pytest.skip("git is needed to read the previous engine")
    root = tmp_path_factory.mktemp("previous")
    package = root / "previous_metrics"
    package.mkdir()
    names = subprocess.run(["git", "-C", str(REPO), "ls-tree", "--name-only", PREVIOUS, "metrics/"],
                           capture_output=True, text=True, check=True).stdout.split()
    for name in names:
        source = subprocess.run(["git", "-C", str(REPO), "show", f"{PREVIOUS}:{name}"],
                                capture_output=True, text=True, check=True).stdout
        (package / Path(name).name).write_text(re.sub(r"\bsteadyrank\.metrics\b", "previous_metrics", source))
    sys.path.insert(0, str(root))
    try:
        return importlib.import_module("previous_metrics")
    finally:
        sys.path.remove(str(root))


@st.composite
def batches(draw):
    """Q queries × W candidates with heavy ties, most candidates unjudged, some rows padded."""
    n_queries = draw(st.integers(1, 5))
    width = draw(st.integers(1, 24))
    values = draw(st.lists(st.floats(-2, 2, width=32), min_size=1, max_size=3, unique=True))
    scores = np.array(draw(st.lists(st.sampled_from(values), min_size=n_queries * width,
                                    max_size=n_queries * width)), dtype=np.float32).reshape(n_queries, width)
    grades = np.array(draw(st.lists(st.sampled_from([0, 0, 0, 1, 2, 3]), min_size=n_queries * width,
                                    max_size=n_queries * width)), dtype=np.int8).reshape(n_queries, width)
    lengths = np.array(draw(st.lists(st.integers(0, width), min_size=n_queries, max_size=n_queries)))
    extra = draw(st.lists(st.integers(0, 3), min_size=n_queries, max_size=n_queries))  # judged, not retrieved
    k = draw(st.integers(1, width + 3))
    rel_level = draw(st.sampled_from([0, 1, 2]))
    rubric = draw(st.sampled_from([None, RUBRIC]))
    return scores, grades, lengths, extra, k, rel_level, rubric


def _judged(grades: np.ndarray, lengths: np.ndarray, extra: list[int]) -> np.ndarray:
    pools = [list(row[:n][row[:n] != 0]) + [1] * e for row, n, e in zip(grades, lengths, extra, strict=True)]
    out = np.full((len(pools), max(len(p) for p in pools) + 1), np.nan)
    for i, pool in enumerate(pools):
        out[i, : len(pool)] = pool
    return out


def _assert_same(now, before, measures) -> None:
    for m in measures:
        for stat in STATS:
            a, b = now[m].stat(stat), before[m].stat(stat)
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, equal_nan=True, err_msg=f"{m} {stat}")


@settings(max_examples=300, deadline=None)
@given(batches())
def test_arrays_match_the_previous_engine(previous, case):
    scores, grades, lengths, extra, k, rel_level, rubric = case
    judged = _judged(grades, lengths, extra)
    measures = [f"{name}@{kk}" for name in PREVIOUS_METRICS for kk in sorted({1, k})]
    kwargs = dict(lengths=lengths, rel_level=rel_level, rubric_map=rubric, gmax=3)
    now = evaluate_arrays(scores, grades, judged, measures, **kwargs)
    before = previous.evaluate_arrays(scores, grades, judged, measures, **kwargs)
    _assert_same(now, before, measures)


@settings(max_examples=150, deadline=None)
@given(batches(), st.sampled_from(["input", "docid"]))
def test_dictionaries_match_the_previous_engine(previous, case, tie_break):
    scores, grades, lengths, extra, k, rel_level, rubric = case
    run = {f"q{i}": {f"d{(j * 7) % 11}-{j}": float(scores[i, j]) for j in range(n)} for i, n in enumerate(lengths)}
    qrels = {}
    for i in range(len(lengths)):
        docs = list(run[f"q{i}"])
        qrels[f"q{i}"] = {d: int(grades[i, j]) for j, d in enumerate(docs) if grades[i, j]}
        qrels[f"q{i}"].update({f"x{e}": 1 for e in range(extra[i])})
    measures = [f"{name}@{k}" for name in PREVIOUS_METRICS]
    kwargs = dict(rel_level=rel_level, rubric_map=rubric, tie_break=tie_break)
    _assert_same(evaluate(run, qrels, measures, **kwargs), previous.evaluate(run, qrels, measures, **kwargs), measures)

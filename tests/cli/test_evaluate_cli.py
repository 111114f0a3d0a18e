"""`steadyrank evaluate` end to end, in a subprocess (``python -m steadyrank.serve.cli``, the console script's target)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e  # each test runs the CLI in a subprocess

QRELS = "q1 0 a 2\nq1 0 b 1\nq1 0 z 3\nq2 0 c 1\n"
# q1: a and b tie at the top; q2's only relevant doc ties with two others.
RUN = "q1 Q0 a 1 0.9 t\nq1 Q0 b 2 0.9 t\nq1 Q0 x 3 0.1 t\nq2 Q0 d 1 0.5 t\nq2 Q0 c 2 0.5 t\nq2 Q0 e 3 0.5 t\n"


def steadyrank(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "steadyrank.serve.cli", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def files(tmp_path):
    (tmp_path / "qrels").write_text(QRELS)
    (tmp_path / "run").write_text(RUN)
    return tmp_path


def test_json_contract_and_nonzero_range(files):
    out = steadyrank("evaluate", "--qrels", str(files / "qrels"), "--run", str(files / "run"),
                     "-m", "ndcg@1", "-m", "mrr@10", "--json", "--per-query")
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    ndcg = payload["metrics"]["ndcg@1"]
    assert set(ndcg) >= {"expected", "min", "max", "range", "oblivious", "bias", "n_valid", "n_na"}
    assert ndcg["range"] > 0 and ndcg["n_valid"] == 2 and ndcg["n_na"] == 0
    assert ndcg["bias"] == pytest.approx(ndcg["oblivious"] - ndcg["expected"])
    assert payload["per_query"]["q2"]["mrr@10"]["expected"] == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)


def test_table_output_lists_every_measure(files):
    out = steadyrank("evaluate", "--qrels", str(files / "qrels"), "--run", str(files / "run"), "-m", "map@10", "-m", "err@5")
    assert out.returncode == 0, out.stderr
    header, _, *rows = out.stdout.splitlines()
    assert header.split()[:7] == ["measure", "E", "min", "max", "range", "oblivious", "bias"]
    assert [r.split()[0] for r in rows] == ["map@10", "err@5"]


def test_tie_break_docid_changes_only_the_oblivious_value(files):
    args = ["evaluate", "--qrels", str(files / "qrels"), "--run", str(files / "run"), "-m", "ndcg@1", "--json"]
    by_input = json.loads(steadyrank(*args).stdout)["metrics"]["ndcg@1"]
    by_docid = json.loads(steadyrank(*args, "--tie-break", "docid").stdout)["metrics"]["ndcg@1"]
    assert by_input["expected"] == by_docid["expected"]
    assert by_input["oblivious"] != by_docid["oblivious"]


@pytest.mark.parametrize(
    "extra, message",
    [(["-m", "ndcg"], "expected NAME@K"), (["-m", "foo@3"], "unknown metric 'foo'"), (["-m", "ndcg@0"], "cutoff must be >= 1")],
)

def test_bad_measures_exit_nonzero_with_one_line(files, extra, message):
    out = steadyrank("evaluate", "--qrels", str(files / "qrels"), "--run", str(files / "run"), *extra)
    assert out.returncode == 2
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_bad_run_line_is_located(files):
    (files / "run").write_text(RUN + "q2 Q0 f 4 NaN t\n")
    out = steadyrank("evaluate", "--qrels", str(files / "qrels"), "--run", str(files / "run"))
    assert out.returncode == 2 and f"{files / 'run'}:7: score is NaN" in out.stderr

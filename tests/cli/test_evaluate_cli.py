"""`steadyrank evaluate` end to end, in a subprocess (``python -m steadyrank.serve.cli``, the console script's target)."""

from __future__ import annotations

import json
import math
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


def test_rarity_parameters_are_applied_and_reported(files):
    (files / "qrels").write_text("q1 0 a 5\nq1 0 b 4\nq1 0 c 4\nq1 0 d 4\nq1 0 e 4\n")
    (files / "run").write_text("q1 Q0 b 1 0.9 t\nq1 Q0 a 2 0.1 t\n")
    args = ["evaluate", "--qrels", str(files / "qrels"), "--run", str(files / "run"), "-m", "ra_nwg@1", "--json"]
    default = json.loads(steadyrank(*args).stdout)
    assert default["parameters"]["rarity_alpha"] == 1.0 and default["parameters"]["rarity_cap3"] == 0.25
    # w4 = min(0.5 · (1/4)^α, cap4): α = 1 → 0.125; α = 0 → 0.5
    assert default["metrics"]["ra_nwg@1"]["expected"] == pytest.approx(0.125)
    changed = json.loads(steadyrank(*args, "--rarity-alpha", "0", "--rarity-cap4", "0.4").stdout)
    assert changed["parameters"]["rarity_alpha"] == 0.0 and changed["metrics"]["ra_nwg@1"]["expected"] == pytest.approx(0.4)


def test_sensitivity_grid_swap_rate_and_cutoff_spread(files):
    other = files / "other"
    other.write_text("q1 Q0 x 1 0.9 t\nq1 Q0 a 2 0.5 t\nq2 Q0 c 1 0.9 t\n")
    out = steadyrank("evaluate", "--qrels", str(files / "qrels"), "--run", str(files / "run"), "--compare-run",
                     str(other), "-m", "ra_nwg@1", "-m", "ndcg@1", "--cutoffs", "1,2", "--ra-sensitivity",
                     "--sensitivity-alphas", "1,2", "--sensitivity-caps", "1:0.25", "--swap-rate", "--swap-trials",
                     "20", "--grade-map", "3:5,2:4,1:3,0:1", "--json")
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert set(payload["metrics"]) == {"ra_nwg@1", "ndcg@1", "ra_nwg@2", "ndcg@2"}
    assert payload["cutoff_spread"]["ndcg"]["cutoffs"] == [1, 2]
    points = payload["sensitivity"]["points"]
    assert [(p["alpha"], p["cap4"], p["cap3"]) for p in points] == [(1.0, 1.0, 0.25), (2.0, 1.0, 0.25)]
    assert set(points[0]["mean"]) == {str(files / "run"), str(other)}
    swaps = {m["measure"]: m for m in payload["swap_rate"]["measures"]}
    assert swaps["ndcg@1"]["pairs"] == 1 and swaps["ndcg@1"]["splits"] <= 20


def test_optional_set_metrics_read_their_files(files):
    (files / "sources").write_text("a site1\nb site1\n")
    (files / "labels").write_text("q1 a 0.5 -\nq1 x - 1\n")
    (files / "answers").write_text("q1 1\nq2 0\n")
    out = steadyrank("evaluate", "--qrels", str(files / "qrels"), "--run", str(files / "run"), "-m", "hit@2",
                     "-m", "udcg@3", "-m", "ra_nwg_novelty@2", "--sources", str(files / "sources"), "--udcg-labels",
                     str(files / "labels"), "--answers", str(files / "answers"), "--json")
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    # q1: a (grade 2, utility 0.5) and b (grade 1, utility 1) tie at the top, x (irrelevant, distraction 1) third.
    q1 = (0.5 + 1 - 1 / 3) / 3
    assert payload["metrics"]["udcg@3"]["n_valid"] == 2
    # hit@2: q1 needs z (not retrieved): 0; q2 holds c among 3 tied at 2 of 3: 2/3. Acc|Hit: only q2 can hit, wrong.
    assert payload["metrics"]["hit@2"]["expected"] == pytest.approx((0 + 2 / 3) / 2)
    assert payload["acc_hit"]["acc|hit@2"]["expected"] == 0.0 and payload["acc_hit"]["acc|hit@2"]["unanswered"] == 0
    per_query = json.loads(steadyrank("evaluate", "--qrels", str(files / "qrels"), "--run", str(files / "run"), "-m",
                                      "udcg@3", "--udcg-labels", str(files / "labels"), "--json",
                                      "--per-query").stdout)["per_query"]
    assert per_query["q1"]["udcg@3"]["expected"] == pytest.approx(1 / (1 + math.exp(-q1)))


@pytest.mark.parametrize("extra, message", [
    (["-m", "udcg@3"], "udcg needs --udcg-labels FILE"),
    (["-m", "ra_nwg_novelty@3"], "ra_nwg_novelty needs --sources FILE"),
    (["--swap-rate"], "--swap-rate compares runs"),
    (["--novelty-beta", "1"], "novelty_beta must be in [0, 1)"),
    (["--answers", "ANSWERS"], "reports Acc|Hit@K for hit@K measures"),
])
def test_optional_inputs_missing_or_wrong(files, extra, message):
    (files / "answers").write_text("q1 yes\n")
    extra = [str(files / "answers") if x == "ANSWERS" else x for x in extra]
    out = steadyrank("evaluate", "--qrels", str(files / "qrels"), "--run", str(files / "run"), *extra)
    assert out.returncode == 2 and message in out.stderr, out.stderr

"""``steadyrank golden build`` end to end on the demo corpus with the ``openai-chat`` judge talking
to the stand-in LLM server (``llm_standin.py``; no LLM can run here): outputs, durable resume after
SIGKILL, bad input, and the built set feeding the shadow evaluator."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from steadyrank.retrieval.store import IndexStore
from steadyrank.serve.cli.main import main
from steadyrank.serve.server.calls import SearchCall
from steadyrank.serve.server.quality.golden_sets import load_golden
from steadyrank.serve.server.quality.service import GoldenProfile, QualityService
from steadyrank.serve.settings.quality import QualitySettings
from tests.golden.conftest import build_args, first_json, output_files
from tests.golden.llm_standin import StandinLLM, judge_config
from tests.quality.test_service import MemoryRecorder

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def llm():
    with StandinLLM(delay_s=0.02) as server:
        yield server


@pytest.fixture(scope="module")
def reference(tmp_path_factory, demo_index, demo_queries, llm) -> tuple[Path, dict, list[str]]:
    """One uninterrupted build (in-process ``main``): its directory, summary and arguments."""
    root = tmp_path_factory.mktemp("golden-ref")
    judge = judge_config(root / "judge.json", llm.base_url)
    args = build_args(demo_index, demo_queries, root / "out", judge)
    import io
    from contextlib import redirect_stdout

    buffer = io.StringIO()
    with redirect_stdout(buffer):
        assert main(args) == 0
    return root / "out", first_json(buffer.getvalue()), args


def test_outputs_load_and_are_complete(reference):
    out, summary, _ = reference
    golden = load_golden(out / "golden.jsonl")
    assert len(golden) == 3 and summary["queries"] == 3
    records = [json.loads(line) for line in (out / "golden.jsonl").read_text().splitlines()]
    for record in records:
        assert record["ranking"] and set(record["ranking"]) == set(record["judgments"])
        audit = json.loads((out / "audit" / f"{record['query_id']}.json").read_text())
        assert {c["kind"] for c in audit["judge_calls"]} == {"grade", "rank"}
        assert all(len(c["prompt_sha256"]) == 64 and c["prompt_tokens"] > 0 for c in audit["judge_calls"])
        assert all(set(p["provenance"]) == {"demo:bm25"} for p in audit["pool"])
        position = {d: i for i, d in enumerate(audit["refined_order"])}
        assert all(position[win] < position[lose] for win, lose in audit["locks"])  # the order respects every lock
    calls = summary["judge_calls"]
    assert calls["grade"] == sum(summary["pool_size"]["mean"] for _ in range(3)) and 0 < calls["rank"] <= 18
    assert sum(summary["grade_distribution"].values()) == sum(len(r["judgments"]) for r in records)
    assert summary["tokens"]["prompt"] > 0 and -1 <= summary["kendall_tau_b_grades_vs_refined"]["mean"] <= 1


@pytest.mark.e2e
def test_sigkill_at_several_points_then_resume_gives_byte_identical_outputs(reference, llm, tmp_path):
    """Killed three times (early in grading, late in grading, during refinement), each restart
    resuming the last; the final outputs equal the uninterrupted build's byte for byte."""
    ref_out, _, args = reference
    out = tmp_path / "out"
    command = [sys.executable, "-m", "steadyrank.serve.cli", *[str(out) if a == str(ref_out) else a for a in args]]
    for kill_after in (2, 12, 12):
        before = llm.completions
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while llm.completions - before < kill_after and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert process.returncode == -signal.SIGKILL, "the build finished before it could be killed"
        assert not (out / "golden.jsonl").exists() and (out / ".state").is_dir()
    resumed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    assert output_files(out) == output_files(ref_out)


def test_a_finished_build_reruns_to_the_same_outputs_and_other_settings_are_refused(reference, capsys):
    out, _, args = reference
    before = output_files(out)
    assert main(args) == 0 and output_files(out) == before
    capsys.readouterr()
    changed = [*args[:-1], "--z", "1.5", "--json"]
    assert main(changed) == 2
    assert "holds a build with other settings" in capsys.readouterr().err


def test_bad_input_fails_clearly_and_writes_nothing(reference, demo_index, demo_queries, tmp_path, capsys):
    _, _, args = reference
    judge = Path(args[args.index("--judge") + 1])

    def run(index, queries, judge_path):
        out = tmp_path / "never"
        code = main(build_args(index, queries, out, judge_path))
        assert code == 2 and not out.exists()
        return capsys.readouterr().err

    assert "index directory not found" in run(tmp_path / "nope", demo_queries, judge)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"_id": "q1", "text": "fine"}\n{"_id": "q2", "text": \n', encoding="utf-8")
    assert f"{bad}:2" in run(demo_index, bad, judge)
    unreachable = judge_config(tmp_path / "down.json", "http://127.0.0.1:9/v1", timeout_s=2)
    assert "cannot reach the judge" in run(demo_index, demo_queries, unreachable)
    assert "judge config not found" in run(demo_index, demo_queries, tmp_path / "missing.json")


def test_built_golden_set_feeds_the_shadow_evaluator(reference, demo_index):
    """The quality settings name the built file; it loads as the deployment loads it and a replay
    round through a real BM25 search of the same index evaluates every golden query."""
    out, _, _ = reference
    settings = QualitySettings(golden=str(out / "golden.jsonl"), sample_size=3, seed=0)
    golden = load_golden(settings.golden, split=settings.golden_split, grade_map=settings.grade_map)
    store = IndexStore.open(demo_index)

    async def search(request: SearchCall) -> dict:
        hits = store.search(request.query, mode=request.mode, depth=request.top_n)
        return {"candidates": [{"id": d, "relevance_score": float(s)} for d, s in zip(hits.doc_ids, hits.scores, strict=False)],
                "meta": {"escalated": False}}

    service = QualityService(settings, golden, search, MemoryRecorder(), profile=GoldenProfile("bm25", "off"))
    assert asyncio.run(service.replay_round()) == 3
    window = service.status()["windows"]["primary"]
    assert window["n"] == 3 and 0 < window["quality"]["ra_nwg@10"]["expected"] <= 1
    store.close()


def test_a_query_without_candidates_is_listed_and_left_out(reference, demo_index, tmp_path, capsys):
    _, _, args = reference
    judge = Path(args[args.index("--judge") + 1])
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"_id": "q01", "text": "restart a crashed systemd service"}\n'
                       '{"_id": "nothing", "text": "zzqx wvvk"}\n', encoding="utf-8")
    out = tmp_path / "out"
    assert main(build_args(demo_index, queries, out, judge)) == 0
    summary = first_json(capsys.readouterr().out)
    assert summary["queries"] == 2 and summary["queries_without_candidates"] == ["nothing"]
    assert list(load_golden(out / "golden.jsonl").queries) == ["q01"]


def test_overwrite_removes_only_the_builds_own_files_and_refuses_a_foreign_directory(reference, tmp_path, capsys):
    """``--out .``-style mistakes: a directory holding other files and no build is refused (with or
    without ``--overwrite``) and left as it was; over a real build, ``--overwrite`` keeps a file the
    user put there and rewrites the outputs."""
    ref_out, _, args = reference
    foreign = tmp_path / "home"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("years of work")
    for extra in ([], ["--overwrite"]):
        assert main([*[str(foreign) if a == str(ref_out) else a for a in args], *extra]) == 2
        assert "holds files that no golden build wrote (thesis.tex" in capsys.readouterr().err
        assert sorted(p.name for p in foreign.iterdir()) == ["thesis.tex"]
    out = tmp_path / "out"
    assert main([str(out) if a == str(ref_out) else a for a in args]) == 0
    (out / "notes.md").write_text("mine")
    (out / "audit" / "README").write_text("mine too")
    assert main([*[str(out) if a == str(ref_out) else a for a in args], "--overwrite"]) == 0
    assert (out / "notes.md").read_text() == "mine" and (out / "audit" / "README").read_text() == "mine too"
    assert output_files(out) == {**output_files(ref_out), "notes.md": b"mine", "audit/README": b"mine too"}


def test_an_edited_prompt_template_is_refused_on_resume(reference, tmp_path, capsys):
    """The template's contents, not its path, are in the fingerprint: editing the file in place
    between two runs refuses the resume instead of mixing two rubrics in one golden set."""
    from importlib import resources

    ref_out, _, args = reference
    judge_path = Path(args[args.index("--judge") + 1])
    template = tmp_path / "grade.txt"
    template.write_text(resources.files("steadyrank.serve.tools.golden").joinpath("templates", "grade.txt").read_text("utf-8"))
    judge = json.loads(judge_path.read_text())
    custom = tmp_path / "judge.json"
    custom.write_text(json.dumps({**judge, "grade_template": str(template)}))
    out = tmp_path / "out"
    run = [str(out) if a == str(ref_out) else str(custom) if a == str(judge_path) else a for a in args]
    assert main(run) == 0
    template.write_text(template.read_text() + "\nBe strict.\n")
    capsys.readouterr()
    assert main(run) == 2
    assert "holds a build with other settings" in capsys.readouterr().err


@pytest.mark.e2e  # the first build runs in a child process
def test_a_second_build_of_a_folder_in_use_is_refused_and_changes_nothing(reference, tmp_path, capsys):
    """Issue 36, item 7: two builds of one folder doubled the judge calls, and the second's
    ``--overwrite`` deleted the first's files. The first build (a child process, on a slower stand-in
    judge so it is still running) holds the folder's lock; a second, with ``--overwrite``, is refused
    naming the folder and the holder before any judge call; the first finishes as if alone."""
    ref_out, ref_summary, args = reference
    out = tmp_path / "out"
    with StandinLLM(delay_s=0.1) as slow:
        judge = judge_config(tmp_path / "judge.json", slow.base_url)
        first_args = [str(out) if a == str(ref_out) else str(judge) if a == args[args.index("--judge") + 1] else a
                      for a in args]
        first = subprocess.Popen([sys.executable, "-m", "steadyrank.serve.cli", *first_args], cwd=REPO,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            deadline = time.monotonic() + 120
            while slow.completions < 1 and first.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)  # the first build holds the lock once it has asked its judge
            assert first.poll() is None, "the first build ended before the second could start"
            assert main([*first_args[:-1], "--overwrite", "--json"]) == 2
            error = capsys.readouterr().err
            assert f"{out} is locked for writing by another process (pid {first.pid})" in error
            assert (out / ".state" / "build.json").is_file()  # --overwrite removed nothing
            stdout, _ = first.communicate(timeout=300)
        finally:
            if first.poll() is None:
                first.kill()
        assert first.returncode == 0
        summary = first_json(stdout)
        judge_calls = summary["judge_calls"]["grade"] + summary["judge_calls"]["rank"]
        assert judge_calls == ref_summary["judge_calls"]["grade"] + ref_summary["judge_calls"]["rank"]
        assert slow.completions == judge_calls  # every judge call was the first build's, none made twice
        assert output_files(out) == output_files(ref_out)  # the first build's outputs, as if it ran alone
        assert main(first_args) == 0  # the lock went with the first build: the folder is free again
        assert slow.completions == judge_calls  # (a finished build resumes without a judge call)

"""One CLI vocabulary across subcommands (docs/guides/indexing.md, "CLI conventions"): ``--out`` is
always a folder and single files are ``--KIND-out FILE``; one ``--grade-map``; ``--batch-size`` says
its unit; one API-key variable; deprecated names still work with a warning; a bad flag prints the
subcommand's usage."""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from steadyrank.serve.cli.main import COMMANDS, build_parser, main, parse
from steadyrank.serve.cli.options import api_key_from_env

BATCH_UNITS = {"DOCS", "SEQUENCES", "PASSAGES"}


def _leaf_parsers(parser: argparse.ArgumentParser, name: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        yield name, parser
        return
    for action in subparsers:
        for child, sub in action.choices.items():
            yield from _leaf_parsers(sub, f"{name} {child}")


def _all_leaves() -> list[tuple[str, argparse.ArgumentParser]]:
    leaves = []
    for command in COMMANDS:
        top = build_parser(command)
        sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
        leaves += list(_leaf_parsers(sub, command))
    return leaves


def test_out_is_a_folder_and_single_files_are_kind_out() -> None:
    seen = set()
    for name, parser in _all_leaves():
        for action in parser._actions:
            for flag in action.option_strings:
                if action.help == argparse.SUPPRESS:
                    continue  # deprecated aliases
                if flag == "--out":
                    assert action.metavar == "DIR", f"{name} --out must be a folder"
                    seen.add(name)
                elif flag.endswith("-out"):
                    assert action.metavar == "FILE", f"{name} {flag} must be a file"
                if flag == "--batch-size":
                    assert action.metavar in BATCH_UNITS and " per " in action.help, f"{name} --batch-size unit"
                assert flag != "--rubric-map", f"{name}: the grade map is --grade-map"
    assert {"index build", "golden build", "clq sweep"} <= seen


@pytest.mark.parametrize("argv, usage", [
    (["index", "build", "--corpus", "c", "--out", "o", "--bogus"], "usage: steadyrank index build"),
    (["evaluate", "--qrels", "q", "--run", "r", "--bogus", "1"], "usage: steadyrank evaluate"),
    (["search", "--index", "i", "--queries", "q", "--run-out", "r", "--bogus"], "usage: steadyrank search"),
    (["clq", "sweep", "--grid", "g", "--corpus", "c", "--golden", "g", "--out", "o", "--bogus"], "usage: steadyrank clq sweep"),
])
def test_unknown_flag_prints_the_subcommand_usage(argv: list[str], usage: str, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err.startswith(usage) and "error: unrecognized arguments: --bogus" in err


def test_a_missing_renamed_flag_is_required_by_its_subcommand(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["search", "--index", "i", "--queries", "q"])
    err = capsys.readouterr().err
    assert err.startswith("usage: steadyrank search") and "the following arguments are required: --run-out" in err


@pytest.mark.parametrize("argv, dest, value, old, new", [
    (["search", "--index", "i", "--queries", "q", "--out", "r.trec"], "run_out", "r.trec", "--out", "--run-out"),
    (["route", "calibrate", "--data", "d", "--index", "i", "--out", "s.json"], "settings_out", "s.json", "--out", "--settings-out"),
    (["precision-report", "--data", "d", "--plot", "p.png"], "plot_out", Path("p.png"), "--plot", "--plot-out"),
    (["evaluate", "--qrels", "q", "--run", "r", "--rubric-map", "3:5,0:1"], "grade_map", {3.0: 5.0, 0.0: 1.0},
     "--rubric-map", "--grade-map"),
])
def test_deprecated_names_still_work_with_a_warning(argv, dest, value, old, new, capsys) -> None:
    args = parse(argv)
    assert getattr(args, dest) == value
    assert f"warning: {old} is deprecated; use {new}" in capsys.readouterr().err


def test_route_calibrate_grade_map_default_and_override() -> None:
    base = ["route", "calibrate", "--data", "d", "--index", "i", "--settings-out", "s"]
    assert parse(base).grade_map == {3.0: 5.0, 2.0: 4.0, 1.0: 3.0, 0.0: 1.0}
    assert parse([*base, "--grade-map", "2:5,1:3,0:1"]).grade_map == {2.0: 5.0, 1.0: 3.0, 0.0: 1.0}


def test_api_key_variable(capsys) -> None:
    assert api_key_from_env({"STEADYRANK_API_KEYS": " k1 , k2", "STEADYRANK_API_KEY": "old"}) == "k1"
    assert capsys.readouterr().err == ""
    assert api_key_from_env({"STEADYRANK_API_KEY": "old"}) == "old"
    assert "warning: $STEADYRANK_API_KEY is deprecated; set $STEADYRANK_API_KEYS" in capsys.readouterr().err
    assert api_key_from_env({}) is None


class _Canary(BaseHTTPRequestHandler):
    """A stand-in for a running server's ``GET /v1/canary`` that records the Authorization header."""

    seen: list[str | None] = []

    def do_GET(self) -> None:  # noqa: N802 — http.server's naming
        type(self).seen.append(self.headers.get("Authorization"))
        body = json.dumps({"verdict": "hold", "paired_queries": 0, "reasons": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_canary_client_sends_the_first_server_key(monkeypatch, capsys) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Canary)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        monkeypatch.setenv("STEADYRANK_API_KEYS", "sk-a,sk-b")
        assert main(["canary", "report", "--url", url, "--json"]) == 0
        monkeypatch.delenv("STEADYRANK_API_KEYS")
        monkeypatch.setenv("STEADYRANK_API_KEY", "sk-old")
        assert main(["canary", "report", "--url", url, "--json"]) == 0
        assert main(["canary", "report", "--url", url, "--api-key", "sk-flag", "--json"]) == 0
    finally:
        server.shutdown()
        server.server_close()
    assert _Canary.seen == ["Bearer sk-a", "Bearer sk-old", "Bearer sk-flag"]
    assert capsys.readouterr().err.count("is deprecated") == 1


def test_index_build_names_the_missing_text_field(tmp_path: Path, capsys) -> None:
    """Pyserini's JSONL (``id``, ``contents``): refused with the field named, built with --text-field."""
    corpus = tmp_path / "pyserini.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "contents": f"passage number {i} about disks"}) + "\n"
                              for i in range(5)), encoding="utf-8")
    assert main(["index", "build", "--corpus", str(corpus), "--out", str(tmp_path / "idx")]) == 2
    assert (f"{corpus}:1: missing field 'text' (use --text-field; fields here: 'id', 'contents')"
            in capsys.readouterr().err)
    assert main(["index", "build", "--corpus", str(corpus), "--text-field", "contents", "--out", str(tmp_path / "idx"),
                 "--no-bm25", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["live_count"] == 5

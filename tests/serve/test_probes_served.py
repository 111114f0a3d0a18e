"""``steadyrank probe names`` / ``probe noise`` against a running server (``--url``, ``--api-key``)."""

from __future__ import annotations

import json

import pytest

from steadyrank.serve.cli.main import main
from tests.serve.conftest import ServeApp


def _run(argv: list[str], capsys) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_probe_names_over_http_matches_the_in_process_embedder(serve_app: ServeApp, capsys) -> None:
    common = ["probe", "names", "--queries", "4", "--lang", "en", "--ablations", "mask", "--json"]
    remote = _run([*common, "--url", serve_app.url, "--api-key", serve_app.api_key], capsys)
    local = _run([*common, "--precision", serve_app.settings.embedder.precision], capsys)
    for r, lo in zip(remote["summary"], local["summary"], strict=True):
        assert (r["ablation"], r["lang"]) == (lo["ablation"], lo["lang"])
        assert r["delta_name"]["mean"] == pytest.approx(lo["delta_name"]["mean"], abs=1e-4)
    reranked = _run([*common, "--kind", "reranker", "--url", serve_app.url, "--api-key", serve_app.api_key], capsys)
    assert {r["ablation"] for r in reranked["summary"]} == {"base", "mask"}
    assert next(r for r in reranked["summary"] if r["ablation"] == "mask")["ties"]["name"] == 4


def test_probe_noise_over_http_and_a_refused_key(serve_app: ServeApp, tmp_path, capsys) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"_id": "q1", "text": "restart a systemd service automatically"}\n', encoding="utf-8")
    out = _run(["probe", "noise", "--queries", str(queries), "--url", serve_app.url, "--api-key", serve_app.api_key,
                "--json"], capsys)
    assert out["cosine"]["4"]["noisy"]["cosine"]["mean"] < out["cosine"]["0"]["noisy"]["cosine"]["mean"]
    assert main(["probe", "noise", "--queries", str(queries), "--url", serve_app.url, "--api-key", "wrong"]) == 2
    assert "HTTP 401" in capsys.readouterr().err


def test_live_probes_through_the_searchers_reranker_handles(handle) -> None:
    """The shadow evaluator's live probe similarity: ``Searcher.probe_keys`` per variant (shadow work)."""
    import asyncio

    from steadyrank.serve.server.quality.probes import LiveProbes
    from steadyrank.serve.settings.quality import ProbeSettings

    searcher = handle("Searcher")

    def similarity(variant: str):
        async def keys(items):
            return await asyncio.to_thread(lambda: searcher.probe_keys.remote(variant, items).result(timeout_s=120))
        return keys

    class Gauges:
        def __init__(self) -> None:
            self.values: dict[tuple, float] = {}

        def set(self, name: str, value: float, **labels: str) -> None:
            self.values[(name, tuple(sorted(labels.items())))] = value

    gauges = Gauges()
    probes = LiveProbes(ProbeSettings(enabled=True, queries=2, languages=["en"], ablations=["mask"]), similarity,
                        gauges, ("primary", "canary"))
    result = asyncio.run(probes.round())
    assert result["primary"]["mask"]["name"] == 0.0 and result["canary"]["mask"]["name"] == 0.0
    assert result["primary"]["base"]["name"] > 0.0  # the bundled MiniLM tells the author from impostors
    key = ("steadyrank_probe_margin", (("ablation", "base"), ("probe", "topic"), ("variant", "canary")))
    assert gauges.values[key] == result["canary"]["base"]["topic"]

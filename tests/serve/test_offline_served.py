"""Offline = served (issue 41 item 5): ``steadyrank search --config S`` writes, for every query, the
ranking ``POST /v1/search`` serves on a server started with the settings S: the same candidates in
the same order with the same float32 scores and FP32 rank keys, bit for bit.

The server is the real application in this process: :func:`serve.server.hosting.colocated.colocate` builds the
real components of the settings (Searcher, Retriever with its FAISS + BM25 index built on first
start, Embedder and Reranker replicas' classes with their batchers, real weights) and
:func:`serve.server.http.create_app` serves them over httpx's ASGI transport; only Ray Serve's process
and proxy are left out (they carry requests, they rank nothing; tests/serve/test_pipeline_parity.py
compares the CLI with the app on real Ray Serve). The CLI runs in the same process (the same torch
threads, so the same float reduction order).

Settings: the embedded default (bundled all-MiniLM-L6-v2 in ``precision: auto``, BF16 on a CPU with
AMX-BF16, reranking from the index's stored vectors; hybrid; dynamic routing; denoise off); FP32
pinned in both model sections (still stored vectors); a reranker section pinning FP32 alone (the
reranker is then not the embedder: documents are re-encoded in FP32; routing k_low 20, k_high 40
from the settings, to keep it short); a cross-encoder reranker (a
tiny random BERT, ``auto``) with boundary-tie re-scoring in FP32; unsharded and, in the split
layout, over two shards (the scatter-gather Retriever and its shard components in process).

Data, not tuned on: the Python language reference topics that CPython ships
(``pydoc_data.topics``, PSF licence): one document per paragraph of each topic, a query per
sixth topic, its heading ("Augmented assignment statements"). The text differs between Python
releases; the test compares two paths on the same text, never a stored answer.

On main (8aeefdd), before this change: ``--config`` did not exist, and with the flags
spelled out the CLI reranked in FP32 (``--rerank-precision`` defaulted to fp32) where the server
reranked from stored BF16 vectors (see CHANGELOG.md, issue 41).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from steadyrank.serve.cli.main import main

KEY = "offline-served-key"
TOP_N = 10
BASE: dict[str, Any] = {"quality": {"enabled": False},
                        "auth": {"api_keys": [KEY], "api_keys_env": "STEADYRANK_TEST_OFFLINE_KEYS"}}


def _paragraphs(text: str) -> list[str]:
    """Prose paragraphs of a reference topic (headings, underlines and grammar blocks left out)."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in block.strip().splitlines()]
        prose = " ".join(lines)
        if len(prose) >= 120 and not block.startswith("   ") and not set(lines[-1]) <= set("*=-~^"):
            out.append(prose[:700])
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """``corpus.jsonl`` (one document per paragraph) and the queries (topic headings); beside them
    the index cache the variants share (an index is keyed by corpus, embedder and shards)."""
    from pydoc_data.topics import topics

    root = tmp_path_factory.mktemp("pydoc")
    docs, queries = [], {}
    for t, (name, text) in enumerate(sorted(topics.items())):
        heading = text.strip().splitlines()[0].strip()
        if t % 6 == 0:
            queries[f"q-{name}"] = heading
        docs += [{"_id": f"{name}-{i}", "text": p} for i, p in enumerate(_paragraphs(text)[:2])]
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    assert len(docs) >= 120 and len(queries) >= 12
    return corpus, queries


async def _served(settings_file: Path, queries: dict[str, str]) -> dict[str, dict[str, Any]]:
    """``POST /v1/search`` of every query (the request's defaults: ``top_n``, mode, route, denoise)."""
    from steadyrank.serve.server.hosting.colocated import colocate
    from steadyrank.serve.server.http import Services, create_app
    from steadyrank.serve.server.http.dialects.names import ServedNames
    from steadyrank.serve.server.model_refs import resolve_model_refs
    from steadyrank.serve.settings import load_settings
    from steadyrank.serve.telemetry import Recorder

    settings = resolve_model_refs(load_settings(settings_file))
    parts = colocate(settings)
    services = Services(settings=settings, names=ServedNames.from_settings(settings),
                        recorder=Recorder(parts.store, flush_interval_s=60), searcher=parts.searcher,
                        embedder=parts.embedder, reranker=parts.reranker, hub=parts.hub)
    out = {}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(services)), base_url="http://test",
                                 headers={"Authorization": f"Bearer {KEY}"}, timeout=300) as client:
        for qid, text in queries.items():
            response = await client.post("/v1/search", json={"query": text, "return_candidates": True})
            assert response.status_code == 200, response.text
            out[qid] = response.json()
    return out


def _offline(flags: list[str], queries: dict[str, str], tmp_path: Path, capsys) -> tuple[dict[str, Any], str]:
    """``steadyrank search FLAGS`` over ``queries``: its ``RUN.json`` and stderr."""
    queries_file = tmp_path / "queries.jsonl"
    queries_file.write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    run = tmp_path / "run.trec"
    capsys.readouterr()
    assert main(["search", *flags, "--queries", str(queries_file), "--run-out", str(run)]) == 0
    return json.loads(Path(f"{run}.json").read_text()), capsys.readouterr().err


@pytest.mark.parametrize("variant", ["default", "fp32", "reranker-fp32", "cross-encoder", "default-sharded",
                                     "reranker-fp32-sharded"])
def test_offline_search_ranks_as_served(variant: str, data, tiny_cross_encoder_dir, tmp_path, capsys) -> None:
    corpus, queries = data
    settings: dict[str, Any] = {**BASE, "cache_dir": str(corpus.parent / "cache"), "index": {"corpus": str(corpus)}}
    if variant == "fp32":
        settings |= {"embedder": {"precision": "fp32"}, "reranker": {"precision": "fp32"}}
    if variant.startswith("reranker-fp32"):  # every candidate re-encoded: shallower, from the served routing
        settings |= {"reranker": {"precision": "fp32"}, "routing": {"k_low": 20, "k_high": 40},
                     "limits": {"max_top_n": 40}}
    if variant == "cross-encoder":
        settings["reranker"] = {"path": str(tiny_cross_encoder_dir)}
    if variant.endswith("sharded"):
        settings["index"]["shards"] = 2
        settings["deployments"] = {"layout": "split"}
    settings_file = tmp_path / "settings.yaml"
    settings_file.write_text(yaml.safe_dump(settings))

    served = asyncio.run(_served(settings_file, queries))
    report, err = _offline(["--config", str(settings_file)], queries, tmp_path, capsys)  # no other setting

    assert f"settings {settings_file}:" in err  # the settings in force, named before the run
    stored = variant in ("default", "fp32", "default-sharded")
    assert report["settings"]["stored_vectors"] is stored
    assert ("scored from the index's stored vectors" in err) is stored
    for qid in queries:
        body, offline = served[qid], report["per_query"][qid]
        assert body["meta"]["k"] == offline["k_reranked"] and body["meta"]["reasons"] == offline["reasons"]
        assert body["candidates"] == offline["candidates"]  # ids, float32 scores and FP32 rank keys, in served order
        assert [r["id"] for r in body["results"]] == [c["id"] for c in offline["candidates"][:TOP_N]]
        assert [r["relevance_score"] for r in body["results"]] == [c["relevance_score"]
                                                                   for c in offline["candidates"][:TOP_N]]


def test_search_flags_default_to_the_embedded_default(data, tmp_path, capsys, monkeypatch) -> None:
    """Without ``--config`` the CLI's defaults are the embedded default's (the server's without a
    settings file): naming the bundled reranker keeps the served section's precision (``auto``) and
    its stored-vector scoring. On main ``--rerank bundled`` meant FP32 with documents re-encoded,
    against BF16 stored vectors served: the top 10 differed on 5 of 14 of these queries, rank keys
    by up to 3.3e-3."""
    from steadyrank.serve.server.default import index_dir
    from steadyrank.serve.settings import ENV_SETTINGS, load_settings

    monkeypatch.delenv(ENV_SETTINGS, raising=False)
    corpus, queries = data
    settings_file = tmp_path / "settings.yaml"  # the embedded default, serving this corpus
    settings_file.write_text(yaml.safe_dump({**BASE, "cache_dir": str(corpus.parent / "cache"),
                                             "index": {"corpus": str(corpus)}}))
    served = asyncio.run(_served(settings_file, queries))
    index = index_dir(load_settings(settings_file))
    report, _ = _offline(["--index", str(index), "--rerank", "bundled"], queries, tmp_path, capsys)
    assert report["settings"]["source"] == "(embedded default)" and report["settings"]["stored_vectors"] is True
    for qid in queries:
        assert served[qid]["candidates"] == report["per_query"][qid]["candidates"]

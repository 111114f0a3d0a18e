"""A sharded index served over HTTP: one shard stops answering, and the search says so.

A second application is deployed beside the session's one (same Ray, route prefix ``/sharded``)
with ``index.shards: 2`` over the embedded demo corpus (the bundled all-MiniLM-L6-v2 embeds and,
as the reranker, scores from the stored FP32 vectors), so each shard has its own
``RetrieverShard<i>`` replica behind the scatter-gather ``Retriever``. Shard 1's replica process is
frozen with SIGSTOP (a real replica that does not answer: a hung node, a stalled disk), searches
are sent through the proxy, then the process is resumed with SIGCONT.

- ``index.partial_results: false`` (the default): the search fails loudly, JSON 503
  ``unavailable_error`` naming the shard, within the shard deadline; never a 200 missing documents.
- ``index.partial_results: true``: 200 with ``meta.partial: true`` and ``meta.missing_shards:
  [1]``, every result owned by shard 0, counted in ``steadyrank_partial_searches_total``.
- After SIGCONT both answer whole again (``meta.partial: false``), and before the freeze the sharded
  application answers every mode with the same ids and scores as the session's unsharded one.

The freeze is kept short (a few seconds) so Serve's replica health check does not replace the
replica meanwhile.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

import httpx
import psutil
import pytest

from tests.serve.conftest import ServeApp, app_beside, parse_metrics, wait_until

APP = "sharded"
SHARD_TIMEOUT_S = 2.0
QUERY = {"query": "how do I list open ports", "top_n": 10}


def sharded_settings(cache_dir: str, partial_results: bool) -> dict:
    deployments = {"layout": "split"} | {name: {"num_cpus": 0.01} for name in
                                         ("ingress", "searcher", "embedder", "reranker", "retriever", "metrics_hub")}
    return {
        "cache_dir": cache_dir,
        "embedder": {"precision": "fp32"},  # as the reference app (tests/serve/conftest.py)
        "index": {"shards": 2, "shard_timeout_s": SHARD_TIMEOUT_S, "partial_results": partial_results},
        "quality": {"enabled": False},
        "telemetry": {"flush_interval_s": 0.2},
        "limits": {"request_timeout_s": 30},
        "deployments": deployments,
    }


@pytest.fixture(scope="module")
def shard_cache(tmp_path_factory) -> str:
    """One cache for both deployments: the sharded demo index is built once (under its build lock)."""
    return str(tmp_path_factory.mktemp("sharded-cache"))


def deployed(serve_app: ServeApp, cache_dir: str, partial_results: bool) -> AbstractContextManager[httpx.Client]:
    return app_beside(serve_app, sharded_settings(cache_dir, partial_results), APP)


def shard_processes(shard: int) -> list[psutil.Process]:
    prefix = f"ray::ServeReplica:{APP}:RetrieverShard{shard}"
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if " ".join(proc.info["cmdline"] or []).startswith(prefix) and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


@contextmanager
def frozen(shard: int) -> Iterator[None]:
    """SIGSTOP every replica process of ``shard``; SIGCONT on the way out."""
    procs = shard_processes(shard)
    assert procs, f"no replica process of RetrieverShard{shard}"
    for proc in procs:
        os.kill(proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for proc in procs:
            os.kill(proc.pid, signal.SIGCONT)


def whole_again(client: httpx.Client) -> dict:
    """The first whole answer after the freeze (the resumed replica first works off its backlog)."""
    def attempt() -> dict | None:
        answer = client.post("/v1/search", json=QUERY)
        return answer.json() if answer.status_code == 200 and not answer.json()["meta"]["partial"] else None

    body = wait_until(attempt, 60, step_s=1.0)
    assert body, "the sharded search did not answer whole again after SIGCONT"
    return body


def test_a_frozen_shard_fails_the_search_loudly(serve_app: ServeApp, client: httpx.Client, shard_cache: str):
    with deployed(serve_app, shard_cache, partial_results=False) as sharded:
        for mode in ("dense", "bm25", "hybrid"):
            ours = sharded.post("/v1/search", json={**QUERY, "mode": mode})
            reference = client.post("/v1/search", json={**QUERY, "mode": mode})
            assert ours.status_code == reference.status_code == 200, (ours.text, reference.text)
            assert ours.json()["meta"]["partial"] is False
            assert [(r["id"], r["relevance_score"]) for r in ours.json()["results"]] == \
                   [(r["id"], r["relevance_score"]) for r in reference.json()["results"]], mode
        whole = sharded.post("/v1/search", json=QUERY).json()
        with frozen(1):
            started = time.monotonic()
            answer = sharded.post("/v1/search", json=QUERY)
            took = time.monotonic() - started
        assert answer.status_code == 503, answer.text
        error = answer.json()["error"]
        assert error["type"] == "unavailable_error" and "shard 1: no answer within 2 s" in error["message"], error
        assert SHARD_TIMEOUT_S <= took < SHARD_TIMEOUT_S + 5, took
        again = whole_again(sharded)
        assert [r["id"] for r in again["results"]] == [r["id"] for r in whole["results"]]


def test_partial_results_name_the_missing_shard(serve_app: ServeApp, shard_cache: str):
    from steadyrank.retrieval.shards import shard_of

    dense = {**QUERY, "mode": "dense"}  # one ranked list: shard 0's part of it is what it answers alone
    with deployed(serve_app, shard_cache, partial_results=True) as sharded:
        whole = sharded.post("/v1/search", json=dense).json()
        assert whole["meta"]["partial"] is False and whole["meta"]["missing_shards"] == []
        assert {shard_of(r["id"], 2) for r in whole["results"]} == {0, 1}, "the query must reach both shards"
        with frozen(1):
            answer = sharded.post("/v1/search", json=dense)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["meta"]["partial"] is True and body["meta"]["missing_shards"] == [1], body["meta"]
        assert body["results"] and {shard_of(r["id"], 2) for r in body["results"]} == {0}
        expected = [r["id"] for r in whole["results"] if shard_of(r["id"], 2) == 0]
        assert [r["id"] for r in body["results"]][: len(expected)] == expected

        def counted() -> float:
            series = parse_metrics(sharded.get("/metrics").text)
            return sum(v for (name, _), v in series.items() if name == "steadyrank_partial_searches_total")

        assert wait_until(lambda: counted() >= 1, 10), "steadyrank_partial_searches_total did not count the search"
        assert whole_again(sharded)["meta"]["missing_shards"] == []

"""One pipeline: ``steadyrank search`` (the CLI, in-process models) and ``/v1/search`` (the Ray Serve
app, model replicas behind handles) serve the same candidates in the same order with the same scores.

The server is the real test application (primary reranker: the bundled MiniLM scored in FP32, the
embedded default); the CLI runs as a subprocess over the index the server's Retriever built, with
the server's routing policy, mode, RRF settings and models.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from steadyrank.retrieval.routing import save_settings

QUERIES = {
    "p1": "how do I make a systemd service restart automatically when it crashes",
    "p2": "find which process is listening on a port",
    "p3": "disk full but du shows little usage",
}
TOP_N = 5


def test_cli_search_serves_what_the_server_serves(serve_app, client, handle, tmp_path: Path) -> None:
    settings = serve_app.settings
    policy = settings.routing_policy()
    index = handle("Retriever").info.remote().result(timeout_s=60)["path"]
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()))
    routing = tmp_path / "routing.json"
    save_settings(routing, policy)
    k_low = min(max(policy.k_low, TOP_N), policy.k_high)  # what the Searcher runs for this top_n
    run = tmp_path / "run.trec"
    argv = [sys.executable, "-m", "steadyrank.serve.cli", "search", "--index", index, "--queries", str(queries),
            "--run-out", str(run), "--mode", "hybrid", "--rerank", "bundled", "--route-settings", str(routing),
            "--depth", str(policy.k_high), "--k-low", str(k_low), "--top-n", str(TOP_N),
            "--rrf-k", str(settings.search.rrf_k), "--rrf-weights", ",".join(map(str, settings.search.rrf_weights)),
            "--route", settings.routing.route, "--embedder-precision", settings.embedder.precision,
            "--rerank-precision", settings.reranker_model.precision, "--json"]
    # one torch thread, as Ray gives a replica with fractional CPUs: the same float reduction order
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads((tmp_path / "run.trec.json").read_text())["per_query"]

    for qid, text in QUERIES.items():
        response = client.post("/v1/search", json={"query": text, "top_n": TOP_N, "mode": "hybrid",
                                                   "return_candidates": True})
        assert response.status_code == 200, response.text
        body = response.json()
        cli = report[qid]
        assert body["meta"]["k"] == cli["k_reranked"] and body["meta"]["escalated"] == cli["escalated"]
        assert body["meta"]["reasons"] == cli["reasons"]
        assert body["candidates"] == cli["candidates"]  # ids, float32 scores and rank keys, in served order
        assert [r["id"] for r in body["results"]] == [c["id"] for c in cli["candidates"][:TOP_N]]
        assert set(body["meta"]["stages_ms"]) - {"total"} == set(cli["stages_ms"])

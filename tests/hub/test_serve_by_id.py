"""The one-command path: a fresh ``steadyrank serve --reranker ID`` process downloads the model from
the (stand-in) Hub and serves it under its id; the Cohere SDK reranks against it. Starts Ray: run
under the heavy lock (``flock /tmp/steadyrank-heavy.lock``)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from tests.hub.conftest import REPO, hub_env
from tests.tiers import e2e_fixture

READY_TIMEOUT_S = 600
KEY = "cohere-sdk-key-0123456789"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture()
@e2e_fixture
def served(hub):
    """``steadyrank serve --reranker REPO --api-key-file F --port P`` in its own session, Ray temp folder
    and caches (a folder under /tmp: Ray's socket paths must stay short); yields (url, log)."""
    work = Path(tempfile.mkdtemp(prefix="srhub-", dir="/tmp"))
    (work / "ray").mkdir()
    keys = work / "keys"
    keys.write_text(f"# the test's key\n{KEY}\n")
    port = _free_port()
    env = hub_env(hub.url, work / "hf-home")
    env = {k: v for k, v in env.items() if not k.startswith("RAY_ADDRESS")}
    env.update(RAY_TMPDIR=str(work / "ray"), RAY_USAGE_STATS_ENABLED="0", PYTHONUNBUFFERED="1",
               STEADYRANK_CACHE=str(work / "cache"))
    log = work / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "steadyrank.serve.cli", "serve", "--reranker", REPO, "--api-key-file", str(keys),
             "--port", str(port), "--num-cpus", "2"],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            assert process.poll() is None, f"steadyrank serve exited early:\n{log.read_text()}"
            try:
                # ready, and announced: /readyz can answer 200 a moment before serve.run returns and the
                # "serving at … API key(s) active" line is printed
                if httpx.get(f"{url}/readyz", timeout=5).status_code == 200 and "is serving at" in log.read_text():
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"not ready in {READY_TIMEOUT_S} s:\n{log.read_text()}"
            time.sleep(1.0)
        yield url, log
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        shutil.rmtree(work, ignore_errors=True)


def test_serve_by_hub_id_and_rerank_with_the_cohere_sdk(served, hub) -> None:
    import cohere

    url, log = served
    co = cohere.ClientV2(api_key=KEY, base_url=url)
    documents = ["free disk space with du and df", "bake sourdough bread", "rotate logs with logrotate"]
    answer = co.rerank(model=REPO, query="how do I free disk space", documents=documents, top_n=2)
    assert len(answer.results) == 2
    assert {r.index for r in answer.results} <= {0, 1, 2}
    assert answer.results[0].relevance_score >= answer.results[1].relevance_score
    by_alias = co.rerank(model="rerank-v3.5", query="how do I free disk space", documents=documents)
    assert [r.index for r in by_alias.results][:2] == [r.index for r in answer.results]
    models = httpx.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {KEY}"}, timeout=30).json()
    assert REPO in {m["id"] for m in models["data"]}, models
    assert not any(len(m["id"]) == 40 and m["id"].isalnum() for m in models["data"])  # never a commit hash
    with pytest.raises(cohere.errors.UnauthorizedError):
        cohere.ClientV2(api_key="wrong", base_url=url).rerank(model=REPO, query="q", documents=documents)
    text = log.read_text()
    assert f"reranker: {REPO} (" in text and "1 API key(s) active" in text
    assert any(path.startswith(f"/{REPO}/resolve/") for _, path in hub.requests)

"""A real two-node Ray cluster (head + worker, each with its own resources, ports and temp dir),
the application deployed the users' way (`serve deploy` of a config derived from
``deploy/serve_config.yaml``: same import path and format; port, settings path and
``proxy_location: HeadOnly`` changed — two proxies cannot share one port on one machine), a
sharded index (2 shards, 2 replicas each; one embedder replica), the reranker autoscaling between 1 and 2 replicas.

Checked: replicas on both nodes; every endpoint answers; the reranker scales up under load and
back down when idle, visible in ``steadyrank_deployment_replicas`` on /metrics and in the series a
real Prometheus scraped from it; the worker node is killed under load: Serve reschedules, requests
keep succeeding (error count and recovery time printed and bounded), /readyz stays truthful.

Real models: the bundled all-MiniLM-L6-v2 embeds and (FP32 HPS cosine) reranks the demo corpus.
Slow (a cluster start and a deployment on a shared 2-core box): a few minutes.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.cluster.local_cluster import LocalCluster, free_ports
from tests.prometheus_server import PrometheusServer

ROOT = Path(__file__).resolve().parents[2]
APP = "steadyrank"


def settings_for(cache: Path) -> dict[str, Any]:
    small = {"num_cpus": 0.05}
    return {
        "cache_dir": str(cache),
        "index": {"shards": 2, "shard_timeout_s": 20.0},
        "quality": {"enabled": False},
        "telemetry": {"flush_interval_s": 0.2},
        "limits": {"request_timeout_s": 60},
        "deployments": {
            "layout": "split",
            "ingress": small, "searcher": small, "metrics_hub": small,
            "embedder": {"num_cpus": 0.1, "num_replicas": 1},
            "retriever": {"num_cpus": 0.05, "num_replicas": 2},
            "reranker": {"num_cpus": 0.1, "max_ongoing_requests": 2, "max_batch_size": 2, "max_queued_requests": -1,
                         "autoscaling": {"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 1,
                                         "upscale_delay_s": 1, "downscale_delay_s": 8}},
        },
    }


def serve_config(settings_path: Path, port: int) -> dict[str, Any]:
    config = yaml.safe_load((ROOT / "deploy" / "serve_config.yaml").read_text())
    config["proxy_location"] = "HeadOnly"
    config["http_options"] = {"host": "127.0.0.1", "port": port}
    (app,) = config["applications"]
    app["args"] = {"settings": str(settings_path)}
    return config


def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str, step_s: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except (httpx.HTTPError, RuntimeError, ValueError) as exc:
            last = exc
        time.sleep(step_s)
    raise AssertionError(f"{what}: not within {timeout_s} s (last: {last!r})")


def replicas_running(url: str, deployment: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith("steadyrank_deployment_replicas{") and f'deployment="{deployment}"' in line \
                and 'state="RUNNING"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> LocalCluster:
    root = tmp_path_factory.mktemp("cluster")
    cluster = LocalCluster(root)
    try:
        cluster.start_head(num_cpus=2, resources={"head_node": 1})
        cluster.wait_nodes(1, 180)
        cluster.start_worker(num_cpus=2, resources={"worker_node": 1})
        yield cluster
    finally:
        cluster.stop()


def deploy(cluster: LocalCluster, settings_mapping: dict[str, Any]) -> str:
    """Deploy the application with ``settings_mapping`` the users' way; its URL once /readyz is 200."""
    (port,) = free_ports(1)
    settings = cluster.root / "settings.yaml"
    settings.write_text(yaml.safe_dump(settings_mapping))
    config = cluster.root / "serve_config.yaml"
    config.write_text(yaml.safe_dump(serve_config(settings, port)))
    deployed = cluster.serve("deploy", str(config))
    assert deployed.returncode == 0, deployed.stderr
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: httpx.get(f"{url}/readyz", timeout=20).status_code == 200, 420, "/readyz 200")
    return url


@pytest.fixture(scope="module")
def app(cluster: LocalCluster) -> str:
    return deploy(cluster, settings_for(cluster.root / "cache"))


def test_replicas_on_both_nodes_and_every_endpoint_answers(cluster: LocalCluster, app: str):
    nodes = {n["id"] for n in cluster.alive_nodes()}
    placement = wait_for(lambda: (p := cluster.replica_nodes()) and len({n for ns in p.values() for n in ns}) == 2 and p,
                         60, "replicas on both nodes")
    assert {n for ns in placement.values() for n in ns} == nodes
    assert {"RetrieverShard0", "RetrieverShard1", "Retriever", "Embedder", "Reranker"} <= set(placement)
    for shard in ("RetrieverShard0", "RetrieverShard1"):
        assert len(set(placement[shard])) == 2, placement  # each shard's 2 replicas spread over both nodes
    status = cluster.serve("status")
    assert status.returncode == 0 and "RUNNING" in status.stdout
    with httpx.Client(base_url=app, timeout=60) as client:
        assert client.get("/healthz").status_code == 200
        ready = client.get("/readyz").json()
        assert ready["status"] == "ready", ready
        for mode in ("dense", "bm25", "hybrid"):
            body = client.post("/v1/search", json={"query": "how do I list open ports", "mode": mode, "top_n": 5}).json()
            assert len(body["results"]) == 5 and body["meta"]["partial"] is False, body
        ranked = client.post("/v1/rerank", json={"query": "disk usage", "documents": ["du -sh shows sizes", "cats"]})
        assert ranked.status_code == 200 and ranked.json()["results"][0]["index"] == 0
        assert client.post("/v1/embeddings", json={"input": ["hello"]}).status_code == 200
        assert client.get("/v1/models").status_code == 200
        assert "steadyrank_requests_total" in client.get("/metrics").text


def _load(url: str, stop: threading.Event, log: list[tuple[float, bool]], path: str, body: dict) -> None:
    with httpx.Client(base_url=url, timeout=30) as client:
        while not stop.is_set():
            try:
                ok = client.post(path, json=body).status_code == 200
            except httpx.HTTPError:
                ok = False
            log.append((time.monotonic(), ok))


def test_reranker_autoscales_up_under_load_and_down_when_idle(cluster: LocalCluster, app: str):
    """Scale up under load and down when idle, seen in /metrics and in a real Prometheus' series."""
    assert wait_for(lambda: replicas_running(app, "Reranker") == 1, 60, "one reranker replica at rest")
    running = 'steadyrank_deployment_replicas{deployment="Reranker",state="RUNNING"}'
    with PrometheusServer(cluster.root, [app.removeprefix("http://")]) as prometheus:
        wait_for(lambda: prometheus.query(running), 60, "Prometheus scraped the replica series")
        stop, log = threading.Event(), []
        docs = [f"passage {i} about linux file systems and disks" for i in range(40)]
        body = {"query": "disk", "documents": docs}
        threads = [threading.Thread(target=_load, args=(app, stop, log, "/v1/rerank", body)) for _ in range(6)]
        started = time.monotonic()
        for t in threads:
            t.start()
        try:
            wait_for(lambda: replicas_running(app, "Reranker") == 2, 150, "second reranker replica RUNNING", 2)
            up_s = time.monotonic() - started
        finally:
            stop.set()
            for t in threads:
                t.join()
        idle = time.monotonic()
        wait_for(lambda: replicas_running(app, "Reranker") == 1, 150, "back to one reranker replica", 2)
        down_s = time.monotonic() - idle
        # Prometheus has scraped the one replica since
        wait_for(lambda: (q := prometheus.query(running)) and float(q[0]["value"][1]) == 1.0, 60,
                 "Prometheus scraped one reranker replica")
        window = f"{int(time.monotonic() - started) + 30}s"
        peak = prometheus.query(f"max_over_time({running}[{window}])")
        now = prometheus.query(running)
    print(f"\nautoscaling: 2 replicas after {up_s:.1f} s of load ({len(log)} requests, "
          f"{sum(not ok for _, ok in log)} errors); 1 replica {down_s:.1f} s after the load stopped; "
          f"Prometheus: max over the run {peak[0]['value'][1] if peak else None}, now {now[0]['value'][1] if now else None}")
    assert all(ok for _, ok in log)
    assert peak and float(peak[0]["value"][1]) == 2.0, peak
    assert now and float(now[0]["value"][1]) == 1.0, now


def test_worker_node_lost_under_load(cluster: LocalCluster, app: str):
    stop, log = threading.Event(), []
    body = {"query": "restart a systemd service", "mode": "hybrid", "top_n": 5}
    threads = [threading.Thread(target=_load, args=(app, stop, log, "/v1/search", body)) for _ in range(2)]
    for t in threads:
        t.start()
    readiness: list[tuple[float, int, bool]] = []
    said: list[str] = []  # each /readyz answer: status and, when given, the lost nodes
    try:
        wait_for(lambda: sum(ok for _, ok in log) >= 10, 120, "10 searches answered before the kill", step_s=0.1)
        killed = time.monotonic()
        cluster.nodes["worker"].kill()
        end = killed + 240  # probe until ready and searching again, or 4 minutes
        with httpx.Client(base_url=app, timeout=20) as client:
            while time.monotonic() < end and not (readiness and readiness[-1][1] == 200 and readiness[-1][2]
                                                  and time.monotonic() > killed + 20):
                try:
                    ready = client.get("/readyz")
                    code, answer = ready.status_code, ready.json()
                    lost = answer.get("checks", {}).get("lost_nodes")
                    said.append(f"{code} {answer.get('status')}" + (f" lost={len(lost)}" if lost else ""))
                except (httpx.HTTPError, ValueError) as exc:
                    code = 0
                    said.append(f"no answer ({type(exc).__name__})")
                try:
                    searched = client.post("/v1/search", json=body).status_code == 200
                except httpx.HTTPError:
                    searched = False
                readiness.append((time.monotonic(), code, searched))
                time.sleep(1)
    finally:
        stop.set()
        for t in threads:
            t.join()
    after = [(t, ok) for t, ok in log if t >= killed]
    errors = [t for t, ok in after if not ok]
    recovery = (max(errors) - killed) if errors else 0.0
    ready_again = next((t - killed for t, code, ok in readiness if code == 200 and ok and t > killed + 20), None)
    result = {"requests_after_kill": len(after), "errors": len(errors), "recovery_s": round(recovery, 2),
              "ready_again_s": ready_again, "readyz": said}
    (cluster.root / "failover.json").write_text(json.dumps(result))
    print(f"\nworker killed under load: {json.dumps(result)}")
    assert len(cluster.alive_nodes()) == 1
    assert after and after[-1][1], "requests must succeed again after the node loss"
    assert recovery < 120, result
    # /readyz tells the truth: whenever it said ready, the search issued right after succeeded
    assert all(searched for _, code, searched in readiness if code == 200), readiness
    assert readiness[-1][1] == 200 and readiness[-1][2]

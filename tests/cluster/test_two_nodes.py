"""A real two-node Ray cluster (head + worker, each with its own resources, ports and temp dir),
the application deployed the users' way (`serve deploy` of a config derived from
``deploy/serve_config.yaml``: same import path and format; port, settings path and
``proxy_location: HeadOnly`` changed — two proxies cannot share one port on one machine), a
sharded index (2 shards, 2 replicas each; one embedder replica), the reranker autoscaling between 1 and 2 replicas.

Checked: replicas on both nodes; every endpoint answers; the reranker scales up under load and
back down when idle, visible in ``steadyrank_deployment_replicas`` on /metrics and in the series a
real Prometheus scraped from it; the worker node is killed under load: Serve reschedules, requests
keep succeeding (error count and recovery time printed and bounded), every answer that is not a 200
is a JSON 503 with ``Retry-After`` (also the requests in flight at the Ingress replica on the killed
node, which Ray Serve's proxy answers), /readyz stays truthful. The Ingress runs one replica on each
node, and the head's proxy spreads requests over both (``RAY_SERVE_PROXY_PREFER_LOCAL_NODE_ROUTING=0``;
by default it prefers the replica on its own node), as a proxy does whose node holds no Ingress
replica (KubeRay's head runs none): so requests are in flight at the killed node's Ingress replica.
The nodes get the environment deploy/kuberay gives them (``serve.launcher.ray_env.node_env``: the Serve
proxy's error callback among it).

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

from steadyrank.serve.server.hosting.proxy_errors import LOST_MESSAGE
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


def serve_config(settings_path: Path, port: int, ingress_per_node: bool = False) -> dict[str, Any]:
    """deploy/serve_config.yaml with this cluster's port and settings; ``ingress_per_node``: the
    Ingress runs 2 replicas, at most one a node (a Serve config override, as the file documents)."""
    config = yaml.safe_load((ROOT / "deploy" / "serve_config.yaml").read_text())
    config["proxy_location"] = "HeadOnly"
    config["http_options"] = {"host": "127.0.0.1", "port": port}
    (app,) = config["applications"]
    app["args"] = {"settings": str(settings_path)}
    if ingress_per_node:
        app["deployments"] = [{"name": "Ingress", "num_replicas": 2, "max_replicas_per_node": 1}]
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
    cluster = LocalCluster(root, node_env={"RAY_SERVE_PROXY_PREFER_LOCAL_NODE_ROUTING": "0"})
    try:
        cluster.start_head(num_cpus=2, resources={"head_node": 1})
        cluster.wait_nodes(1, 180)
        cluster.start_worker(num_cpus=2, resources={"worker_node": 1})
        yield cluster
    finally:
        cluster.stop()


def deploy(cluster: LocalCluster, settings_mapping: dict[str, Any], ingress_per_node: bool = False) -> str:
    """Deploy the application with ``settings_mapping`` the users' way; its URL once /readyz is 200."""
    (port,) = free_ports(1)
    settings = cluster.root / "settings.yaml"
    settings.write_text(yaml.safe_dump(settings_mapping))
    config = cluster.root / "serve_config.yaml"
    config.write_text(yaml.safe_dump(serve_config(settings, port, ingress_per_node)))
    deployed = cluster.serve("deploy", str(config))
    assert deployed.returncode == 0, deployed.stderr
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: httpx.get(f"{url}/readyz", timeout=20).status_code == 200, 420, "/readyz 200")
    return url


@pytest.fixture(scope="module")
def app(cluster: LocalCluster) -> str:
    return deploy(cluster, settings_for(cluster.root / "cache"), ingress_per_node=True)


def test_replicas_on_both_nodes_and_every_endpoint_answers(cluster: LocalCluster, app: str):
    nodes = {n["id"] for n in cluster.alive_nodes()}
    placement = wait_for(lambda: (p := cluster.replica_nodes()) and len({n for ns in p.values() for n in ns}) == 2 and p,
                         60, "replicas on both nodes")
    assert {n for ns in placement.values() for n in ns} == nodes
    assert {"RetrieverShard0", "RetrieverShard1", "Retriever", "Embedder", "Reranker"} <= set(placement)
    assert set(placement["Ingress"]) == nodes, placement  # an Ingress replica on each node
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


def _answers(url: str, stop: threading.Event, log: list[tuple[float, bool, str | None]], body: dict,
             refusals: list[str]) -> None:
    """Search without pause until ``stop``; log (time, ok, what is wrong with a non-200 answer or
    None when it is a JSON 503 with Retry-After) and the label of each JSON 503 in ``refusals``. The
    client waits longer than the request's deadline
    (limits.request_timeout_s 60), so every request gets an answer."""
    with httpx.Client(base_url=url, timeout=90) as client:
        while not stop.is_set():
            try:
                r = client.post("/v1/search", json=body)
            except httpx.HTTPError as exc:
                log.append((time.monotonic(), False, f"no answer: {type(exc).__name__}"))
                continue
            log.append((time.monotonic(), r.status_code == 200, None if r.status_code == 200 else _not_retryable(r)))
            if r.status_code != 200 and _not_retryable(r) is None:
                refusals.append(_label(r))


def _not_retryable(response: httpx.Response) -> str | None:
    """None for a JSON 503 with Retry-After and an error body; else what it is instead."""
    what = f"{response.status_code} {response.headers.get('content-type')} {response.text[:120]!r}"
    if response.status_code != 503 or not response.headers.get("retry-after"):
        return what
    try:
        return None if "type" in response.json()["error"] else what
    except (ValueError, KeyError, TypeError):
        return what


def _label(answer: httpx.Response | str) -> str:
    """``200``; ``503 <error type>`` for a JSON 503 with Retry-After (``503 lost with its replica``
    for the proxy's answer to a request lost with its Ingress replica); else what it is instead."""
    if isinstance(answer, str) or answer.status_code == 200:
        return answer if isinstance(answer, str) else "200"
    wrong = _not_retryable(answer)
    if wrong is not None:
        return wrong
    error = answer.json()["error"]
    return "503 lost with its replica" if error["message"] == LOST_MESSAGE else f"503 {error['type']}"


def _slow_rerank(url: str, answers: list[httpx.Response | str]) -> None:
    docs = [f"passage {i}: the df command reports the disk space each mounted file system uses" for i in range(400)]
    with httpx.Client(base_url=url, timeout=90) as client:
        try:
            answers.append(client.post("/v1/rerank", json={"query": "disk usage", "documents": docs}))
        except httpx.HTTPError as exc:
            answers.append(f"no answer: {type(exc).__name__}")


def test_worker_node_lost_under_load(cluster: LocalCluster, app: str):
    """The worker, holding one of the two Ingress replicas and other replicas, is killed under
    search load while slow rerank requests are in flight at both Ingress replicas: searches succeed
    again afterwards, and every answer that is not a 200 is a JSON 503 with Retry-After, those of
    the requests lost with the killed Ingress replica included (Ray Serve's proxy answers those:
    serve/server/hosting/proxy_errors.py; before it, a plain-text 500)."""
    stop, log, refusals = threading.Event(), [], []
    body = {"query": "restart a systemd service", "mode": "hybrid", "top_n": 5}
    threads = [threading.Thread(target=_answers, args=(app, stop, log, body, refusals)) for _ in range(2)]
    for t in threads:
        t.start()
    readiness: list[tuple[float, int, bool]] = []
    said: list[str] = []  # each /readyz answer: status and, when given, the lost nodes
    slow: list[httpx.Response | str] = []
    slow_threads = [threading.Thread(target=_slow_rerank, args=(app, slow)) for _ in range(8)]
    try:
        wait_for(lambda: sum(ok for _, ok, _ in log) >= 10, 120, "10 searches answered before the kill", step_s=0.1)
        for t in slow_threads:  # the proxy spreads them over both Ingress replicas (less loaded first)
            t.start()
        time.sleep(0.5)  # the proxy has handed them to the Ingress replicas
        assert len(slow) <= len(slow_threads) // 2, "most slow reranks finished before the kill: make them slower"
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
        for t in threads + slow_threads:
            t.join()
    after = [(t, ok) for t, ok, _ in log if t >= killed]
    errors = [t for t, ok in after if not ok]
    recovery = (max(errors) - killed) if errors else 0.0
    ready_again = next((t - killed for t, code, ok in readiness if code == 200 and ok and t > killed + 20), None)
    wrong = [(round(t - killed, 2), what) for t, _, what in log if what is not None]
    slow_answers = [_label(a) for a in slow]
    wrong += [("slow rerank", a) for a in slow_answers if a != "200" and not a.startswith("503 ")]
    result = {"requests_after_kill": len(after), "errors": len(errors), "recovery_s": round(recovery, 2),
              "ready_again_s": ready_again, "slow_reranks": slow_answers, "not_json_503": wrong, "readyz": said}
    (cluster.root / "failover.json").write_text(json.dumps(result))
    print(f"\nworker killed under load: {json.dumps(result)}")
    assert len(cluster.alive_nodes()) == 1
    assert after and after[-1][1], "requests must succeed again after the node loss"
    assert recovery < 120, result
    assert not wrong, result  # every answer JSON; every refusal a retryable 503
    # a request was lost with the killed Ingress (a slow rerank or a search; the proxy decides which
    # Ingress replica holds which, so which of them is not fixed) and got the proxy's JSON 503
    assert "503 lost with its replica" in slow_answers + refusals, result
    # /readyz tells the truth: whenever it said ready, the search issued right after succeeded
    assert all(searched for _, code, searched in readiness if code == 200), readiness
    assert readiness[-1][1] == 200 and readiness[-1][2]

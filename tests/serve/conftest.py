"""The real Ray Serve application, deployed once per test session on a free loopback port.

- primary reranker: the bundled all-MiniLM-L6-v2 scored in FP32 (HPS) — the embedded default;
- canary reranker: a tiny random BERT cross-encoder run in BF16 with HPS and boundary re-scoring
  (exercises precision facts, ties and re-scoring on the search path);
- index: the embedded demo corpus (``serve/data/demo``), built into a temporary cache at start;
- quality: the shadow evaluator on the demo golden set (interval 10 s, 2 queries per round);
- one API key (``API_KEY``); replicas reserve 0.1–0.2 CPUs each; the primary reranker accepts 2
  ongoing and 2 queued requests (so the overload test can provoke 503s).

Fixtures: ``serve_app`` (url, settings, api key, app name), ``client`` (httpx, authorised),
``anon_client`` (httpx, no key), ``metrics_text`` (GET /metrics, parsed), ``handle`` (a
DeploymentHandle by deployment name).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.tiers import integration_fixture

API_KEY = "test-key-0123456789"
APP_NAME = "steadyrank"
TINY_BERT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
                 max_position_embeddings=512)
DEPLOYMENTS = ("ingress", "searcher", "embedder", "reranker", "canary_reranker", "retriever", "metrics_hub", "evaluator")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
@integration_fixture
def tiny_cross_encoder_dir(tmp_path_factory) -> Path:
    """A tiny random BertForSequenceClassification (1 logit) with the MiniLM tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from steadyrank.serve.runtime import bundled_embedder_path

    tokenizer = AutoTokenizer.from_pretrained(str(bundled_embedder_path()), local_files_only=True)
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=tokenizer.vocab_size, num_labels=1, **TINY_BERT)).eval()
    path = tmp_path_factory.mktemp("tiny-cross-encoder")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def app_settings(cache_dir: Path, cross_encoder: Path) -> dict[str, Any]:
    """The test application's settings (a steadyrank settings mapping)."""
    deployments: dict[str, Any] = {"layout": "split"} | {name: {"num_cpus": 0.1} for name in DEPLOYMENTS}
    deployments["reranker"] = {"num_cpus": 0.2, "max_ongoing_requests": 2, "max_batch_size": 2,
                               "max_queued_requests": 2, "batch_wait_timeout_s": 0.002}
    deployments["canary_reranker"] = {"num_cpus": 0.1, "max_ongoing_requests": 8, "max_batch_size": 4}
    deployments["embedder"] = {"num_cpus": 0.2, "max_ongoing_requests": 32, "max_batch_size": 16}
    return {
        "cache_dir": str(cache_dir),
        # FP32 on every machine (the default, auto, picks bf16 on a CPU with AMX-BF16): the primary
        # path's facts and scores are asserted against FP32; auto is tested in tests/runtime.
        "embedder": {"precision": "fp32"},
        "canary": {"path": str(cross_encoder), "precision": "bf16", "scoring": "hps"},
        "limits": {"max_documents": 300, "max_document_chars": 5000, "max_query_chars": 500,
                   "max_body_bytes": 256 * 1024, "max_embedding_inputs": 64, "request_timeout_s": 120,
                   "retry_after_s": 2},
        "admission": {"max_in_flight": 8, "refusals_per_s": 10,
                      # work-based admission off (its refusals are tested in tests/http/test_admission.py):
                      # the replicas' deadline drops must stay reachable by test_load_shedding.py
                      "headroom": 100},
        "auth": {"api_keys": [API_KEY], "api_keys_env": "STEADYRANK_TEST_API_KEYS"},
        "quality": {"enabled": True, "interval_s": 10, "sample_size": 2, "seed": 0, "canary_fraction": 0.5},
        "telemetry": {"flush_interval_s": 0.2},
        "deployments": deployments,
    }


@dataclass(frozen=True)
class ServeApp:
    url: str
    api_key: str
    name: str
    settings: Any  # serve.settings.Settings


@pytest.fixture(scope="session")
def serve_app(ray_session, tmp_path_factory, tiny_cross_encoder_dir) -> Iterator[ServeApp]:
    """Deploy the application once; wait until /readyz answers 200; delete it at session end."""
    from ray import serve as ray_serve

    from steadyrank.serve.server.hosting.builder import build_app
    from steadyrank.serve.settings import load_settings

    settings = load_settings(app_settings(tmp_path_factory.mktemp("cache"), tiny_cross_encoder_dir))
    port = _free_port()
    ray_serve.start(http_options={"host": "127.0.0.1", "port": port})
    ray_serve.run(build_app({"settings": settings}), name=APP_NAME, route_prefix="/")
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=10).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the steadyrank app did not become ready in 120 s")
        time.sleep(0.5)
    yield ServeApp(url=url, api_key=API_KEY, name=APP_NAME, settings=settings)
    ray_serve.delete(APP_NAME)


@pytest.fixture
def client(serve_app: ServeApp) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=serve_app.url, timeout=120,
                      headers={"Authorization": f"Bearer {serve_app.api_key}"}) as c:
        yield c


@pytest.fixture
def anon_client(serve_app: ServeApp) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=serve_app.url, timeout=120) as c:
        yield c


@contextmanager
def app_beside(serve_app: ServeApp, settings: Any, name: str, timeout_s: float = 60) -> Iterator[httpx.Client]:
    """Deploy a second application from ``settings`` (a mapping or a settings file path) under
    ``/<name>`` on the session's Ray Serve; yield a client of it once /readyz answers 200 (at most
    300 s); delete it on the way out."""
    from ray import serve as ray_serve

    from steadyrank.serve.server.hosting.builder import build_app

    ray_serve.run(build_app({"settings": settings}), name=name, route_prefix=f"/{name}")
    try:
        with httpx.Client(base_url=f"{serve_app.url}/{name}", timeout=timeout_s) as client:
            ready = wait_until(lambda: client.get("/readyz").status_code == 200, 300, step_s=1.0)
            assert ready, f"the application {name!r} did not become ready"
            yield client
    finally:
        ray_serve.delete(name)


def wait_until(predicate: Callable[[], Any], timeout_s: float, step_s: float = 0.5) -> Any:
    """Poll ``predicate`` until it returns something truthy or ``timeout_s`` passed; its last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(step_s)


def parse_metrics(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Prometheus text → ``{(sample name, sorted labels): value}``."""
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


@pytest.fixture
def metrics_text(anon_client: httpx.Client) -> Callable[[], dict]:
    """A function returning the current /metrics, parsed by :func:`parse_metrics`."""

    def read() -> dict:
        response = anon_client.get("/metrics")
        assert response.status_code == 200
        return parse_metrics(response.text)

    return read


@pytest.fixture
def handle(serve_app: ServeApp) -> Callable[[str], Any]:
    """``handle("Searcher")`` → a DeploymentHandle of the test application."""
    from ray import serve as ray_serve

    return lambda name: ray_serve.get_deployment_handle(name, app_name=serve_app.name)

"""OpenTelemetry spans (``server.tracing``), recorded by the real SDK into its in-memory exporter:
a request's trace continues the client's ``traceparent``; the spans go from the ingress through the
component calls down to the retriever (a real Searcher over the stand-in embedder and reranker and a
stand-in retriever, which stands for a FAISS/BM25 index); with tracing off, no span at all."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.pipeline import CandidatePool
from steadyrank.serve import tracing
from steadyrank.serve.server.hosting.colocated import LocalHandle
from tests.http.conftest import FakeReranker, build

pytestmark = pytest.mark.anyio

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"


@pytest.fixture(scope="module")
def exporter() -> Iterator[Any]:
    """The process' SDK tracer provider (set up here where none is) with an in-memory exporter."""
    trace = pytest.importorskip("opentelemetry.trace")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        trace.set_tracer_provider(TracerProvider())
    memory = InMemorySpanExporter()
    trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(memory))
    yield memory
    tracing.configure(False)


@pytest.fixture
def spans(exporter: Any) -> Iterator[Any]:
    exporter.clear()
    yield exporter
    tracing.configure(False)


class StandInRetriever:
    """Three documents with unit vectors, in a fixed order, whatever the query."""

    async def info(self) -> dict[str, Any]:
        return {"documents": 3}

    async def search(self, query: str, vector: Any, mode: str, depth: int, with_vectors: bool) -> CandidatePool:
        vectors = np.eye(3, 4, dtype=np.float32)
        return CandidatePool(["d1", "d2", "d3"], np.array([0.9, 0.5, 0.1]),
                             [Document(d, f"text {d}") for d in ("d1", "d2", "d3")], None, None, {},
                             vectors if with_vectors else None)


class StandInReranker(FakeReranker):
    """The fake reranker, with FP32 keys for the boundary-tie rescoring of stored-vector scores
    (document i of n: ``1 - i / n``)."""

    async def fp32_keys(self, query: str, documents: list[str], shadow: bool = False) -> np.ndarray:
        return np.array([1 - i / len(documents) for i in range(len(documents))], np.float32)


def by_name(spans: Any) -> dict[str, Any]:
    finished = spans.get_finished_spans()
    assert len({s.name for s in finished}) == len(finished), [s.name for s in finished]
    return {s.name: s for s in finished}


async def test_a_request_continues_the_clients_trace(spans: Any) -> None:
    served = build({"server": {"tracing": True}})
    async with served.client() as client:
        response = await client.post("/v1/rerank", json={"query": "q", "documents": ["a", "b"]},
                                     headers={"traceparent": TRACEPARENT, "X-Request-Id": "trace-me"})
    assert response.status_code == 200
    named = by_name(spans)
    assert set(named) == {"POST /v1/rerank", "reranker.rerank"}
    server, call = named["POST /v1/rerank"], named["reranker.rerank"]
    assert {format(s.context.trace_id, "032x") for s in named.values()} == {TRACE_ID}
    assert format(server.parent.span_id, "016x") == CLIENT_SPAN and server.parent.is_remote
    assert call.parent.span_id == server.context.span_id
    assert server.attributes["http.response.status_code"] == 200
    assert server.attributes["http.route"] == "/v1/rerank"
    assert server.attributes["steadyrank.request_id"] == "trace-me"
    assert call.attributes["documents"] == 2


async def test_search_spans_go_down_to_the_retriever(spans: Any) -> None:
    from steadyrank.serve.server.components.searcher import Searcher

    served = build({"server": {"tracing": True}})
    services = served.services
    searcher = Searcher(services.settings, services.embedder, LocalHandle(StandInRetriever()),
                                      LocalHandle(StandInReranker()), None, served.hub.store)
    services.searcher = LocalHandle(searcher)
    async with served.client() as client:
        response = await client.post("/v1/search", json={"query": "a question", "mode": "dense", "top_n": 2},
                                     headers={"traceparent": TRACEPARENT})
    assert response.status_code == 200, response.text
    assert [r["id"] for r in response.json()["results"]] == ["d1", "d2"]
    named = by_name(spans)
    assert {"POST /v1/search", "searcher.search", "embedder.embed", "retriever.search"} <= set(named)
    assert {format(s.context.trace_id, "032x") for s in named.values()} == {TRACE_ID}
    assert named["searcher.search"].parent.span_id == named["POST /v1/search"].context.span_id
    for child in ("embedder.embed", "retriever.search"):
        assert named[child].parent.span_id == named["searcher.search"].context.span_id
    assert named["retriever.search"].attributes["mode"] == "dense"


async def test_without_a_traceparent_a_new_trace_and_a_5xx_is_an_error(spans: Any) -> None:
    served = build({"server": {"tracing": True}})
    served.reranker.behaviour.raises = RuntimeError("a bug")
    async with served.client() as client:
        response = await client.post("/v1/rerank", json={"query": "q", "documents": ["a"]})
    assert response.status_code == 500
    server = by_name(spans)["POST /v1/rerank"]
    assert server.parent is None and format(server.context.trace_id, "032x") != TRACE_ID
    assert server.status.status_code.name == "ERROR"


async def test_tracing_off_makes_no_span(spans: Any) -> None:
    served = build()
    assert not served.services.settings.server.tracing
    async with served.client() as client:
        response = await client.post("/v1/rerank", json={"query": "q", "documents": ["a"]},
                                     headers={"traceparent": TRACEPARENT})
    assert response.status_code == 200
    assert spans.get_finished_spans() == ()
    assert not tracing.enabled()


@pytest.mark.e2e
def test_without_opentelemetry_tracing_off_works_and_on_is_a_settings_error() -> None:
    """In a process where ``opentelemetry`` cannot be imported: spans are no-ops, the default settings
    load, and ``server.tracing: true`` is refused naming the extra."""
    import subprocess
    import sys

    script = """
import sys
sys.modules["opentelemetry"] = None  # not installed
from steadyrank.serve import tracing
from steadyrank.serve.settings import SettingsError, load_settings
tracing.configure(load_settings({}).server.tracing)
with tracing.span("nothing"):
    pass
try:
    load_settings({"server": {"tracing": True}})
except SettingsError as exc:
    print(exc)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert "server.tracing: needs OpenTelemetry" in out and "steadyrank[otel]" in out

"""The HTTP layer in process: :func:`serve.server.http.create_app` around stand-in components, called
through httpx's ASGI transport (no Ray, no models).

Stand-ins (they stand for model replicas, which need model weights and Ray): ``FakeReranker``
scores document i of n as ``1 - i / n`` (input order is served order) and reports documents of more
than 8 words as truncated (chunked: a chunk scores the times it says ``needle``),
``FakeEmbedder`` returns unit vectors (of dimension 4 unless told) and counts words as
tokens (on a worker thread: a replica's work is not the ingress loop's), ``FakeSearcher`` a fixed
two-result outcome. Each can be told to
raise, or to wait on an event. The metrics hub, Recorder, ServedNames, settings, admission and the
HTTP stack are the real ones; components are called through the colocated layout's real
``LocalHandle``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
import pytest

from steadyrank.serve.server.calls import Deadline, EmbedOutcome, RerankOutcome
from steadyrank.serve.server.components.metrics_hub import MetricsHub
from steadyrank.serve.server.hosting.colocated import LocalHandle
from steadyrank.serve.server.hosting.failures import RAY_SERVE
from steadyrank.serve.server.http import Services, create_app
from steadyrank.serve.server.http.dialects.names import ServedNames
from steadyrank.serve.settings import load_settings
from steadyrank.serve.telemetry import Recorder

KEY = "user-key-0123"
ADMIN_KEY = "admin-key-0123"
RERANKER_ID = "fake-reranker"
EMBEDDER_ID = "fake-embedder"


@dataclass
class Behaviour:
    """What a stand-in does on its next calls: ``raises`` (an exception to raise), ``hold`` (an
    event to wait for before answering)."""

    raises: BaseException | None = None
    hold: asyncio.Event | None = None
    calls: list[Any] = field(default_factory=list)

    async def act(self, *args: Any) -> None:
        self.calls.append(args)
        if self.hold is not None:
            await self.hold.wait()
        if self.raises is not None:
            raise self.raises


class FakeReranker:
    def __init__(self) -> None:
        self.behaviour = Behaviour()
        self.instructions: list[str | None] = []  # each rerank call's instruction
        self.deadlines: list[Deadline | None] = []  # each rerank call's deadline

    async def info(self) -> dict[str, Any]:
        return {"model": RERANKER_ID, "max_length": 8, "precision": "fp32", "scoring": "hps", "kind": "cross_encoder",
                "input_max_length": 16, "input_reserve": 3, "query_in_input": True}

    async def rerank(self, query: str, documents: list[str], top_n: int | None = None,
                     deadline: Deadline | None = None, instruction: str | None = None,
                     chunks: list[int] | None = None) -> RerankOutcome:
        self.instructions.append(instruction)
        self.deadlines.append(deadline)
        await self.behaviour.act(query, documents, top_n)
        if chunks is not None:
            return self.chunked(documents, chunks)
        n = len(documents)
        return RerankOutcome(scores=np.array([1 - i / n for i in range(n)], np.float32), order=list(range(n)),
                             tie_groups=[], tie_at_cutoff=False, tie_group_size_at_cutoff=0, rescored=0,
                             truncated=[i for i, d in enumerate(documents) if len(d.split(maxsplit=8)) > 8],
                             model=RERANKER_ID, precision="fp32", scoring="hps")

    @staticmethod
    def chunked(chunk_texts: list[str], chunks: list[int]) -> RerankOutcome:
        """Chunked: a chunk scores the times it says ``needle``; a document its best chunk's score."""
        from steadyrank.retrieval.ranking import rank
        from steadyrank.serve.runtime.chunking import aggregate_max

        keys, winners = aggregate_max(np.array([t.split().count("needle") for t in chunk_texts], np.float32), chunks)
        ranking = rank(keys, None, None)
        return RerankOutcome(scores=keys, order=ranking.order.tolist(), tie_groups=[g.tolist() for g in ranking.tie_groups],
                             tie_at_cutoff=False, tie_group_size_at_cutoff=0, rescored=0, truncated=[],
                             model=RERANKER_ID, precision="fp32", scoring="hps", winners=winners.tolist(),
                             chunks=list(chunks))


class FakeEmbedder:
    def __init__(self, dim: int = 4) -> None:
        self.behaviour = Behaviour()
        self.dim = dim
        self.prompts: list[dict[str, Any]] = []  # each embed call's prompt keywords
        self.deadlines: list[Deadline | None] = []  # each embed call's deadline

    async def info(self) -> dict[str, Any]:
        return {"model": EMBEDDER_ID, "dim": 4, "precision": "fp32", "scoring": "hps", "max_length": 8}

    async def embed(self, texts: list[str], count_tokens: bool = False, deadline: Deadline | None = None,
                    shadow: bool = False, role: str | None = None, prompt_name: str | None = None,
                    instruction: str | None = None) -> EmbedOutcome:
        self.prompts.append({"role": role, "prompt_name": prompt_name, "instruction": instruction})
        self.deadlines.append(deadline)
        await self.behaviour.act(texts)
        vectors = np.full((len(texts), self.dim), 1 / np.sqrt(self.dim), np.float32)  # unit vectors
        tokens = await asyncio.to_thread(lambda: sum(len(t.split()) for t in texts)) if count_tokens else None
        return EmbedOutcome(vectors, tokens)


class FakeSearcher:
    def __init__(self) -> None:
        self.behaviour = Behaviour()

    async def ready(self) -> dict[str, Any]:
        await self.behaviour.act("ready")
        return {"retriever": {"path": "/secret/index/path", "documents": 3}}

    async def search(self, call: Any) -> Any:
        from steadyrank.serve.server.calls import SearchOutcome

        await self.behaviour.act(call)
        meta = {"k": 2, "escalated": False, "reasons": [], "signals": {}, "stages_ms": {}, "retrieval_ms": {},
                "mode": "hybrid", "retrieved": 2, "tie_groups": [], "tie_at_cutoff": False,
                "tie_group_size_at_cutoff": 0, "rescored_ties": 0, "model": RERANKER_ID, "precision": "fp32",
                "scoring": "hps", "variant": "primary", "shadow": False}
        return SearchOutcome.model_validate({
            "results": [{"id": "d1", "relevance_score": 0.9}, {"id": "d2", "relevance_score": 0.1}],
            "candidates": [{"id": "d1", "relevance_score": 0.9, "rank_key": 2.0},
                           {"id": "d2", "relevance_score": 0.1, "rank_key": -2.0}], "meta": meta})


class FakeEvaluator:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def mirror(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    async def status(self) -> dict[str, Any]:
        return {"mirrored": len(self.events)}

    async def canary_report(self) -> dict[str, Any]:
        return {"verdict": None}


@dataclass
class Served:
    """An app built around stand-ins, and those stand-ins."""

    app: Any
    services: Services
    reranker: FakeReranker
    embedder: FakeEmbedder
    searcher: FakeSearcher
    evaluator: FakeEvaluator
    hub: Any

    def client(self, key: str | None = KEY, **kwargs: Any) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url="http://test",
                                 headers=headers, **kwargs)


def build(overrides: dict[str, Any] | None = None) -> Served:
    """A served app with keys ``KEY`` (user) and ``ADMIN_KEY`` (admin); ``overrides``: settings."""
    mapping: dict[str, Any] = {"auth": {"api_keys": [KEY], "admin_keys": [ADMIN_KEY],
                                        "api_keys_env": "STEADYRANK_TEST_HTTP_KEYS",
                                        "admin_keys_env": "STEADYRANK_TEST_HTTP_ADMIN_KEYS"},
                               "limits": {"max_documents": 50, "max_document_chars": 200, "max_query_chars": 100,
                                          "max_body_bytes": 64 * 1024, "max_embedding_inputs": 8,
                                          "request_timeout_s": 5, "retry_after_s": 2},
                               "admission": {"max_in_flight": 4, "refusals_per_s": 0}}
    for section, values in (overrides or {}).items():
        mapping[section] = {**mapping.get(section, {}), **values}
    settings = load_settings(mapping)
    hub = MetricsHub()
    reranker, embedder, searcher, evaluator = FakeReranker(), FakeEmbedder(), FakeSearcher(), FakeEvaluator()
    # the stand-ins take instructions and a few named prompts, as an instruction-tuned model would
    names = ServedNames(reranker=(RERANKER_ID, "rr-alias"), embedder=(EMBEDDER_ID,), embedder_dim=4, matryoshka=True,
                        embedder_prompt_names=("classification", "document", "query"), embedder_instruction=True,
                        reranker_instruction=True)
    services = Services(settings=settings, names=names, recorder=Recorder(hub.store, flush_interval_s=60),
                        searcher=LocalHandle(searcher), embedder=LocalHandle(embedder),
                        reranker=LocalHandle(reranker), hub=LocalHandle(hub), evaluator=LocalHandle(evaluator),
                        host=RAY_SERVE)
    return Served(create_app(services), services, reranker, embedder, searcher, evaluator, hub)


@pytest.fixture
def served() -> Served:
    return build()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def metric(served: Served, name: str, **labels: str) -> float:
    """The current value of a sample in the app's metrics (after a flush)."""
    from prometheus_client.parser import text_string_to_metric_families

    served.services.recorder.flush()
    for family in text_string_to_metric_families(served.hub.store.render().decode()):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


class Uvicorn:
    """The app on a real uvicorn server on 127.0.0.1 (its own thread and event loop)."""

    def __init__(self, app) -> None:
        import uvicorn

        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                                    timeout_keep_alive=30, limit_concurrency=None))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> int:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        return self.server.servers[0].sockets[0].getsockname()[1]

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

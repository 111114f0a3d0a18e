"""The call shape of each component as the HTTP layer calls it: one ``Protocol`` per component.

A component is called as ``handle.method.remote(...)``, which returns an awaitable of the method's
answer: a Ray Serve ``DeploymentHandle`` does so in the split layout, a
:class:`~serve.server.hosting.colocated.LocalHandle` in the colocated one, the stand-ins of the in-process
tests (tests/http) likewise. Each Protocol below names the methods the routes call and, through
their ``remote`` signatures, the arguments and answer of each, so that the type checker verifies
every call the HTTP layer makes (the handles themselves are untyped: Ray's and the colocated
layout's reach :class:`~serve.server.http.services.Services` as ``Any``, so nothing checks that they fit
at run time). ``tests/serve/test_graph.py`` checks that every method here exists on its deployment
class with the same parameters.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol, TypeVar

from steadyrank.serve.server.calls import (
    Deadline,
    EmbedOutcome,
    RerankOutcome,
    ScoreOutcome,
    SearchCall,
    SearchOutcome,
)

_Answer = TypeVar("_Answer", covariant=True)


class _Ask(Protocol[_Answer]):
    """A method called without arguments (``info``, ``ready``, ``render``, ``status``, ``canary_report``)."""

    def remote(self) -> Awaitable[_Answer]: ...


class _Rerank(Protocol):
    def remote(self, query: str, documents: list[str], top_n: int | None = None, record: bool = True,
               deadline: Deadline | None = None, instruction: str | None = None,
               chunks: list[int] | None = None) -> Awaitable[RerankOutcome]: ...


class _Score(Protocol):
    def remote(self, query: str, documents: list[str], shadow: bool = False, deadline: Deadline | None = None,
               instruction: str | None = None) -> Awaitable[ScoreOutcome]: ...


class _Embed(Protocol):
    def remote(self, texts: list[str], count_tokens: bool = False, deadline: Deadline | None = None,
               shadow: bool = False, role: str | None = None, prompt_name: str | None = None,
               instruction: str | None = None) -> Awaitable[EmbedOutcome]: ...


class _Search(Protocol):
    def remote(self, request: SearchCall | dict[str, Any]) -> Awaitable[SearchOutcome]: ...


class _Mirror(Protocol):
    def remote(self, event: dict[str, Any]) -> Awaitable[None]: ...


class _Proposals(Protocol):
    def remote(self, n: int | None = None) -> Awaitable[dict[str, Any]]: ...


class RerankerHandle(Protocol):
    """``Reranker`` (serve.server.components.reranker)."""

    @property
    def info(self) -> _Ask[dict[str, Any]]: ...
    @property
    def rerank(self) -> _Rerank: ...
    @property
    def score(self) -> _Score: ...


class EmbedderHandle(Protocol):
    """``Embedder`` (serve.server.components.embedder)."""

    @property
    def info(self) -> _Ask[dict[str, Any]]: ...
    @property
    def embed(self) -> _Embed: ...


class SearcherHandle(Protocol):
    """``Searcher`` (serve.server.components.searcher)."""

    @property
    def ready(self) -> _Ask[dict[str, Any]]: ...
    @property
    def search(self) -> _Search: ...


class MetricsHubHandle(Protocol):
    """``MetricsHub`` (serve.server.components.metrics_hub)."""

    @property
    def ready(self) -> _Ask[dict[str, Any]]: ...
    @property
    def render(self) -> _Ask[bytes]: ...


class EvaluatorHandle(Protocol):
    """``ShadowEvaluator`` (serve.server.quality.evaluator)."""

    @property
    def mirror(self) -> _Mirror: ...
    @property
    def judge_live(self) -> _Mirror: ...
    @property
    def status(self) -> _Ask[dict[str, Any]]: ...
    @property
    def canary_report(self) -> _Ask[dict[str, Any]]: ...
    @property
    def drift_proposals(self) -> _Proposals: ...
    def segment_routes(self) -> _Ask[dict[str, Any]]: ...


#: Each Protocol and the deployment class it stands for (module, class name), for the drift test.
DEPLOYMENT_OF = {
    RerankerHandle: ("steadyrank.serve.server.components.reranker", "Reranker"),
    EmbedderHandle: ("steadyrank.serve.server.components.embedder", "Embedder"),
    SearcherHandle: ("steadyrank.serve.server.components.searcher", "Searcher"),
    MetricsHubHandle: ("steadyrank.serve.server.components.metrics_hub", "MetricsHub"),
    EvaluatorHandle: ("steadyrank.serve.server.quality.evaluator", "ShadowEvaluator"),
}

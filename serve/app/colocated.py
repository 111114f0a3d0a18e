"""The colocated layout (``deployments.layout: colocated``, the default): one Ray Serve replica holds
every component.

The Ingress replica builds the Searcher, Retriever, Embedder, Reranker (and CanaryReranker),
MetricsHub and ShadowEvaluator as plain objects from their deployment classes and calls them
through :class:`LocalHandle`, which has a ``DeploymentHandle``'s call shape
(``handle.method.remote(...)`` → an awaitable) but runs the method on this replica's event loop:
no serialisation, no second process, no handle hop. Deadlines, cancellation (a caller that gives
up cancels the task, so a queued model job is dropped before its forward pass), batching across
concurrent requests and the metrics are the same code as in the split layout; the components'
Recorders write straight into the in-process metrics store.

All model and FAISS work of the replica runs on its one compute thread
(:func:`serve.app.deployments.common.model_executor`), so the two models and the index never run
concurrent OpenMP teams on the same cores.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from steadyrank.serve.app.settings import Settings
from steadyrank.serve.telemetry import MetricsStore


@dataclass(frozen=True)
class LocalMethod:
    """``remote(*args, **kwargs)``: call the method now; a coroutine becomes a task on the running loop."""

    method: Callable[..., Any]

    def remote(self, *args: Any, **kwargs: Any) -> asyncio.Future:
        result = self.method(*args, **kwargs)
        if inspect.isawaitable(result):
            return asyncio.ensure_future(result)
        done = asyncio.get_running_loop().create_future()
        done.set_result(result)
        return done


class LocalHandle:
    """An in-process object behind the call shape of a Ray Serve ``DeploymentHandle``."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def __getattr__(self, name: str) -> LocalMethod:
        return LocalMethod(getattr(self.target, name))


@dataclass(frozen=True)
class Colocated:
    """The components of one colocated replica, as the Ingress calls them."""

    searcher: LocalHandle
    embedder: LocalHandle
    reranker: LocalHandle
    retriever: LocalHandle
    hub: LocalHandle
    evaluator: LocalHandle | None
    store: MetricsStore  # what the Ingress' own Recorder writes into


def colocate(settings: Settings) -> Colocated:
    """Build every component in this process (called from the Ingress constructor, on the
    replica's event loop: the ShadowEvaluator starts its replay loop there)."""
    from steadyrank.serve.app.deployments.embedder import Embedder
    from steadyrank.serve.app.deployments.metrics_hub import MetricsHub
    from steadyrank.serve.app.deployments.reranker import Reranker
    from steadyrank.serve.app.deployments.retriever import Retriever
    from steadyrank.serve.app.deployments.searcher import Searcher

    d = settings.deployments
    hub = MetricsHub.func_or_class()
    store = hub.store
    embedder = Embedder.func_or_class(settings, store)
    embedder.reconfigure(d.embedder.ray_options()["user_config"])
    reranker = Reranker.func_or_class(settings, settings.reranker_model, "primary", store)
    reranker.reconfigure(d.reranker.ray_options()["user_config"])
    canary = None
    if settings.canary is not None:
        canary = Reranker.func_or_class(settings, settings.canary, "canary", store)
        canary.reconfigure(d.canary_reranker.ray_options()["user_config"])
    embedder_h, reranker_h = LocalHandle(embedder), LocalHandle(reranker)
    retriever_h = LocalHandle(Retriever.func_or_class(settings))
    searcher = LocalHandle(Searcher.func_or_class(settings, embedder_h, retriever_h, reranker_h,
                                                  LocalHandle(canary) if canary is not None else None, store))
    evaluator = None
    if settings.quality.enabled:
        from steadyrank.serve.quality.deployment import ShadowEvaluator

        variants = ("primary", "canary") if canary is not None else ("primary",)
        evaluator = LocalHandle(ShadowEvaluator.func_or_class(settings.quality, searcher, store, variants))
    return Colocated(searcher=searcher, embedder=embedder_h, reranker=reranker_h, retriever=retriever_h,
                     hub=LocalHandle(hub), evaluator=evaluator, store=store)

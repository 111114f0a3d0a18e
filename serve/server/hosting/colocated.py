"""The colocated layout (``deployments.layout: colocated``, the default): one Ray Serve replica holds
every component.

The Ingress replica builds the Searcher, Retriever, Embedder, Reranker (and CanaryReranker),
MetricsHub and ShadowEvaluator as plain objects from their classes and calls them
through :class:`LocalHandle`, which has a ``DeploymentHandle``'s call shape
(``handle.method.remote(...)`` → an awaitable) but runs the method on this replica's event loop:
no serialisation, no second process, no handle hop. Deadlines, cancellation (a caller that gives
up cancels the task, so a queued model job is dropped before its forward pass), batching across
concurrent requests and the metrics are the same code as in the split layout; the components'
Recorders write straight into the in-process metrics store.

All model and FAISS work of the replica runs on its one compute thread
(:func:`serve.server.components.common.model_executor`), so the two models and the index never run
concurrent OpenMP teams on the same cores.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from steadyrank.serve.settings import Settings
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
    """Build every component of :func:`serve.server.hosting.graph.components` in this process (called from the
    Ingress constructor, on the replica's event loop: the ShadowEvaluator starts its replay loop
    there); a component's arguments name the others through :class:`LocalHandle` and record into
    the MetricsHub's store."""
    from steadyrank.serve.server.hosting.graph import HUB, components

    built: dict[str, Any] = {}

    def resolve(ref: Any) -> Any:
        return built["metrics_hub"].store if ref == HUB else LocalHandle(built[ref.key])

    for component in components(settings):
        part = component.cls(*component.resolved(resolve))
        if hasattr(part, "reconfigure"):  # a batched model: its batch options (Ray passes them as user_config)
            part.reconfigure(component.ray_options(settings)["user_config"])
        built[component.key] = part
    handle = {key: LocalHandle(part) for key, part in built.items()}
    return Colocated(searcher=handle["searcher"], embedder=handle["embedder"], reranker=handle["reranker"],
                     retriever=handle["retriever"], hub=handle["metrics_hub"], evaluator=handle.get("evaluator"),
                     store=built["metrics_hub"].store)

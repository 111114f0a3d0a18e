"""The Ray Serve ``Ingress`` deployment: a thin class that builds the components (or takes their
handles) and mounts the HTTP application of :func:`serve.server.http.create_app` on them.

``deployments.layout: colocated`` (the default): this replica builds every component itself
(:func:`serve.server.hosting.colocated.colocate`); ``split``: the other deployments' handles are passed in.
Everything HTTP (routes, auth, limits, admission, deadlines, error bodies, request ids, metrics)
lives in :mod:`serve.server.http`; see docs/ARCHITECTURE.md, "HTTP layer".
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from ray import serve

from steadyrank.serve.server.cpu_priority import renice_local_proxies
from steadyrank.serve.server.hosting.exposure import check_exposure
from steadyrank.serve.server.hosting.failures import RAY_SERVE
from steadyrank.serve.server.hosting.health import replica_health_async
from steadyrank.serve.server.hosting.replica_grpc import bind_replica_grpc_to_node
from steadyrank.serve.server.http import Services, create_app
from steadyrank.serve.server.http.context import configure_logging
from steadyrank.serve.server.http.dialects.names import ServedNames
from steadyrank.serve.server.http.state import AppParts
from steadyrank.serve.settings import Settings, load_settings
from steadyrank.serve.telemetry import Recorder


@serve.deployment(name="Ingress")
@serve.ingress()
class Ingress:
    """HTTP front: mounts :func:`~serve.server.http.create_app` over this replica's components."""

    def __init__(self, settings: Settings | dict, searcher: Any = None, embedder: Any = None, reranker: Any = None,
                 retriever: Any = None, hub: Any = None, evaluator: Any = None) -> None:
        """``deployments.layout: split``: the other deployments' handles. ``colocated``: no handles;
        this replica builds every component itself (:func:`serve.server.hosting.colocated.colocate`)."""
        bind_replica_grpc_to_node()  # on a loopback node: this replica's gRPC server on loopback, not [::]
        settings = load_settings(settings)
        check_exposure(settings)  # Serve's real address, from its controller: never serve open
        configure_logging(settings.server.log_format)
        sink = hub
        renice_local_proxies(settings.deployments.background_niceness)  # refusals yield to forward passes
        if settings.deployments.layout == "colocated":
            from steadyrank.serve.server.hosting.colocated import colocate

            parts = colocate(settings)
            searcher, embedder, reranker = parts.searcher, parts.embedder, parts.reranker
            hub, evaluator, sink = parts.hub, parts.evaluator, parts.store
        context = serve.get_replica_context()
        app_name = context.app_name

        async def health() -> Any:
            return await replica_health_async(app_name)

        self.services = Services(
            settings=settings, names=ServedNames.from_settings(settings),
            recorder=Recorder(sink, flush_interval_s=settings.telemetry.flush_interval_s),
            searcher=searcher, embedder=embedder, reranker=reranker, hub=hub, evaluator=evaluator,
            health=health, replica_id=context.replica_id.unique_id, echoes_request_id=True, host=RAY_SERVE)
        self.http_app = create_app(self.services)

    def __serve_build_asgi_app__(self) -> FastAPI:
        return self.http_app

    async def drain(self) -> dict[str, Any]:
        """Shutdown, step one (called by ``steadyrank serve`` on SIGTERM/SIGINT through the app
        handle, before any deployment stops): from now on this replica refuses new scoring requests
        (JSON 503 with ``Retry-After``) and ``/readyz`` answers 503 "draining". Returns this
        replica's id and its scoring requests and shadow hand-offs still in flight; the caller
        polls until they reach zero, so chained calls (ingress → Searcher → Embedder, Retriever,
        Reranker) finish before the deployments they need are torn down."""
        state: AppParts = self.http_app.state.parts
        state.gate.draining = True
        return {"replica": self.services.replica_id, "in_flight": state.gate.in_flight + len(state.gateway.background)}

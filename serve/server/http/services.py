"""What the HTTP layer is given (:class:`Services`; what it keeps per ingress replica for admission
is :class:`~serve.server.admission.gate.Gate`).

``Services`` holds the components behind the routes as handles with a Ray Serve
``DeploymentHandle``'s call shape (``handle.method.remote(...)`` → awaitable): real handles in the
split layout, :class:`~serve.server.hosting.colocated.LocalHandle` in the colocated one, plain fakes in the
in-process tests (tests/http); each typed by its component's Protocol (:mod:`serve.server.handles`).
What the host's own failures mean (a lost replica, a full queue) is the host's to say
(:class:`HostFailures`): the HTTP edge imports no Ray."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from steadyrank.serve.errors import SteadyrankError
from steadyrank.serve.server.handles import (
    EmbedderHandle,
    EvaluatorHandle,
    MetricsHubHandle,
    RerankerHandle,
    SearcherHandle,
)
from steadyrank.serve.server.http.dialects.documents import TokenCutter
from steadyrank.serve.server.http.dialects.names import ServedNames
from steadyrank.serve.settings import Settings
from steadyrank.serve.telemetry import Recorder


def _never_lost(exc: BaseException) -> bool:
    return False


def _no_domain_error(exc: BaseException, retry_after_s: int) -> SteadyrankError | None:
    return None


@dataclass(frozen=True)
class HostFailures:
    """What the host's own failures mean, told by the hosting layer (Ray Serve's:
    :data:`serve.server.hosting.failures.RAY_SERVE`). ``lost(exc)``: the replica serving a call was
    lost, so the call may be made again (:func:`serve.server.retry.again_if_lost`);
    ``domain(exc, retry_after_s)``: the domain error a host failure stands for (its full queue, a
    deployment without replicas), or None. The default: components called in process, whose
    failures are their own."""

    lost: Callable[[BaseException], bool] = _never_lost
    domain: Callable[[BaseException, int], SteadyrankError | None] = _no_domain_error


@dataclass
class Services:
    """The components the routes call, and what the app needs to know about them.

    ``health``: an awaitable returning the application's replica health
    (:class:`~serve.server.hosting.health.ReplicaHealth`), or None outside Ray Serve. ``replica_id``: this
    ingress replica's id (reported by ``drain``). ``echoes_request_id``: the server in front already
    sends the request's ``X-Request-Id`` back (Ray Serve's HTTP servers do, for the id they put in
    the request's headers), so the app does not add a second one. ``host``: what the host's own
    failures mean (:class:`HostFailures`)."""

    settings: Settings
    names: ServedNames
    recorder: Recorder
    searcher: SearcherHandle
    embedder: EmbedderHandle
    reranker: RerankerHandle
    hub: MetricsHubHandle
    evaluator: EvaluatorHandle | None = None
    health: Callable[[], Awaitable[Any]] | None = None
    replica_id: str = "local"
    echoes_request_id: bool = False
    host: HostFailures = field(default_factory=HostFailures)
    reranker_tokens: TokenCutter = field(init=False)
    embedder_tokens: TokenCutter = field(init=False)

    def __post_init__(self) -> None:
        self.reranker_tokens = TokenCutter(self.settings.reranker_model)
        self.embedder_tokens = TokenCutter(self.settings.embedder)

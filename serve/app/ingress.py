"""The HTTP ingress: FastAPI on Ray Serve (``@serve.ingress``).

Routes: ``POST /v1/rerank``, ``POST /v1/search``, ``POST /v1/embeddings``, the client dialects
(``POST /v2/rerank`` Cohere v2, ``POST /rerank`` TEI or Infinity, ``POST /embed`` TEI; see
``serve.app.dialects``), ``GET /v1/models``,
``GET /v1/canary``, ``GET /v1/quality`` (scoring routes: bearer API key when keys are configured),
``GET /healthz``, ``GET /readyz``, ``GET /metrics`` (open unless ``auth.protect_metrics``).

Each scoring request: API key (constant-time) → body read with a size cap (413) → schema (422,
naming the field; 400 for broken JSON) → emptiness (400) and size limits (413) → the deployment
call under a deadline (504; ``X-Request-Timeout`` may shorten it) → JSON. A full queue downstream
(``max_queued_requests``) answers 503 with ``Retry-After``. Admission control: one ingress replica
works on at most ``limits.max_in_flight`` scoring requests; the next is refused at once (JSON 503,
``Retry-After``) before any compute. The deadline travels to the model replicas, which drop a
request still queued when it passes (or when its client disconnected) before its forward pass;
``steadyrank_requests_dropped_total{deployment, reason}`` counts both. Every outcome is counted in
``steadyrank_requests_total{endpoint, code}`` and timed in ``steadyrank_request_duration_seconds``.
After a ``/v1/search`` response is sent, the shadow evaluator (when configured) gets a copy of the
request and its reranked candidates, fire-and-forget.
"""

# No `from __future__ import annotations` here: FastAPI must see real annotations on the routes
# that Ray Serve's ingress wraps (a string annotation `Request` would become a query parameter).
import asyncio
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError
from ray import serve
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException as StarletteHTTPException

from steadyrank.serve.app import protocol
from steadyrank.serve.app.admission import RefusalPacer, WorkQueue
from steadyrank.serve.app.cpu_priority import renice_local_proxies
from steadyrank.serve.app.dialects import cohere, contract, infinity, tei
from steadyrank.serve.app.dialects import embeddings as embedding_dialect
from steadyrank.serve.app.dialects.documents import TokenCutter, document_text
from steadyrank.serve.app.dialects.names import ServedNames
from steadyrank.serve.app.errors import (
    ApiError,
    BadRequest,
    NotFound,
    Overloaded,
    PayloadTooLarge,
    ShuttingDown,
    Timeout,
    Unauthorized,
    Unavailable,
    error_response,
    schema_error,
)
from steadyrank.serve.app.health import replica_health_async
from steadyrank.serve.app.settings import Settings, load_settings
from steadyrank.serve.output import json_safe
from steadyrank.serve.telemetry import Recorder

logger = logging.getLogger("steadyrank.ingress")

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

app = FastAPI(
    title="steadyrank",
    description="Reranking middleware with High-Precision Scoring, tie facts and dynamic-K search.",
    version="0.1.0",
)


@app.exception_handler(StarletteHTTPException)
async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    message = str(exc.detail)
    if exc.status_code in (404, 405):
        message = f"{exc.detail}: {request.method} {request.url.path}"
        logger.warning("%s", message)
    kind = {404: "not_found_error", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request_error")
    return error_response(exc.status_code, kind, message, getattr(exc, "headers", None))


@app.exception_handler(RequestValidationError)
async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
    return schema_error(exc).response()


class JSON(JSONResponse):
    """JSON without NaN/inf (written as null), compact."""

    def render(self, content: Any) -> bytes:
        try:
            return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
        except ValueError:
            return json.dumps(json_safe(content), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    """OpenAPI request body of a route that parses its body itself."""
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": model.model_json_schema(
        ref_template="#/components/schemas/{model}")}}}}


def _errors(*codes: int) -> dict[int, dict[str, Any]]:
    """OpenAPI ``responses`` of a scoring route: the JSON error body for each status code."""
    return {code: {"model": protocol.ErrorResponse} for code in codes}


def root_cause(exc: BaseException) -> BaseException:
    """The exception a replica raised, out of Ray's wrappers."""
    seen = 0
    while getattr(exc, "cause", None) is not None and seen < 5:
        exc = exc.cause  # type: ignore[assignment]
        seen += 1
    return exc


def replica_lost(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) says the replica serving the call died or became
    unreachable (``RayActorError``: ``ActorDiedError``, ``ActorUnavailableError``)."""
    from ray.exceptions import RayActorError

    seen = 0
    while exc is not None and seen < 6:
        if isinstance(exc, RayActorError):
            return True
        exc = getattr(exc, "cause", None) or exc.__cause__  # type: ignore[assignment]
        seen += 1
    return False


def declared_size(request: Request) -> int | None:
    """The request's ``Content-Length`` in bytes, or None when it sends none (or not a number)."""
    declared = request.headers.get("content-length")
    return int(declared) if declared is not None and declared.isdigit() else None


def message_of(exc: BaseException) -> str:
    cause = root_cause(exc)
    return str(cause.args[0]) if cause.args else type(cause).__name__


# The model deployment each scoring endpoint sends all its work to, for refusing before the body is
# read (Ingress._refusal). The TEI routes are left out: their handlers answer errors in TEI's shape.
MODEL_OF_ENDPOINT = {"rerank": "reranker", "rerank_v2": "reranker", "embeddings": "embedder"}


@serve.deployment(name="Ingress")
@serve.ingress(app)
class Ingress:
    """HTTP front: validation, limits, auth, deadlines, metrics; the work happens in the handles."""

    def __init__(self, settings: Settings | dict, searcher: Any = None, embedder: Any = None, reranker: Any = None,
                 retriever: Any = None, hub: Any = None, evaluator: Any = None) -> None:
        """``deployments.layout: split``: the other deployments' handles. ``colocated``: no handles;
        this replica builds every component itself (:func:`serve.app.colocated.colocate`)."""
        settings = load_settings(settings)
        self.settings = settings
        self.limits = settings.limits
        sink = hub
        renice_local_proxies(settings.deployments.background_niceness)  # refusals yield to forward passes
        if settings.deployments.layout == "colocated":
            from steadyrank.serve.app.colocated import colocate

            parts = colocate(settings)
            searcher, embedder, reranker, retriever = parts.searcher, parts.embedder, parts.reranker, parts.retriever
            hub, evaluator, sink = parts.hub, parts.evaluator, parts.store
        self.searcher, self.embedder, self.reranker, self.retriever = searcher, embedder, reranker, retriever
        self.hub, self.evaluator = hub, evaluator
        self.keys = [k.encode("utf-8") for k in settings.auth.resolved_keys()]
        self.recorder = Recorder(sink, flush_interval_s=settings.telemetry.flush_interval_s)
        self.facts: dict[str, dict[str, Any]] = {}
        self._background: set[asyncio.Task] = set()
        self.in_flight = 0
        self.draining = False
        self.work = {model: WorkQueue(headroom=self.limits.admission_headroom) for model in ("reranker", "embedder")}
        self.pacer = RefusalPacer(self.limits.refusals_per_s, self.limits.refusal_max_wait_s)
        self.names = ServedNames.from_settings(settings)
        self.reranker_tokens = TokenCutter(settings.reranker_model)
        self.embedder_tokens = TokenCutter(settings.embedder)
        values = contract.contract_values(settings.limits, self.names)
        values["truncation_directions"] = [*tei.directions(settings.reranker_model.truncation_side), None]
        contract.install(app, values)

    # -- plumbing -----------------------------------------------------------------------------

    def _authorize(self, request: Request) -> None:
        """Bearer key check in constant time (every configured key is compared)."""
        if not self.keys:
            return
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
        presented = token.strip().encode("utf-8")
        matched = False
        for key in self.keys:
            matched |= hmac.compare_digest(presented, key)
        if not matched:
            raise Unauthorized("invalid API key")

    async def _body(self, request: Request) -> bytes:
        limit = self.limits.max_body_bytes
        declared = declared_size(request)
        if declared is not None and declared > limit:
            raise PayloadTooLarge(f"request body of {declared} bytes exceeds the limit of {limit} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def _parse(self, request: Request, model: type[BaseModel]) -> Any:
        return await self._parse_bytes(await self._body(request), model)

    async def _parse_bytes(self, body: bytes, model: type[BaseModel]) -> Any:
        if not body.strip():
            raise BadRequest("request body is empty: send a JSON object")
        try:
            return model.model_validate_json(body)
        except ValidationError as exc:
            raise schema_error(exc) from None

    def _deadline(self, request: Request) -> float:
        limit = self.limits.request_timeout_s
        header = request.headers.get("x-request-timeout")
        if header is None:
            return limit
        try:
            asked = float(header)
        except ValueError:
            raise BadRequest(f"X-Request-Timeout must be a number of seconds, got {header!r}") from None
        if not asked > 0:
            raise BadRequest("X-Request-Timeout must be > 0")
        return min(asked, limit)

    async def _call(self, deadline: float, call: Callable[[], Awaitable[Any]]) -> Any:
        """Await ``call()`` (a deployment call) under ``deadline`` seconds, mapping Ray's errors to
        HTTP ones. A call whose replica died under it (process killed, node lost) is made again
        while the deadline allows: Serve routes it to a live or replacement replica, and every call
        made here reads only (scoring, search, reports), so a repeat is safe. Repeats are counted
        in ``steadyrank_request_retries_total{reason="replica_lost"}``."""
        from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError

        from steadyrank.serve.app.deployments.common import DeadlineExceeded, InvalidRequest

        ends = time.monotonic() + deadline
        try:
            while True:
                try:
                    return await asyncio.wait_for(call(), timeout=max(0.0, ends - time.monotonic()))
                except Exception as exc:
                    if not replica_lost(exc) or time.monotonic() >= ends:
                        raise
                    self.recorder.inc("steadyrank_request_retries_total", reason="replica_lost")
                    await asyncio.sleep(min(0.1, max(0.0, ends - time.monotonic())))  # let Serve see the loss
        except (asyncio.TimeoutError, DeadlineExceeded):
            raise Timeout(f"request took longer than its deadline of {deadline:g} s") from None
        except BackPressureError:
            raise Overloaded("server overloaded: too many queued requests; retry later",
                             self.limits.retry_after_s) from None
        except DeploymentUnavailableError as exc:
            raise Unavailable(f"a deployment is unavailable: {message_of(exc)}") from None
        except (InvalidRequest, ValueError) as exc:
            cause = root_cause(exc)
            if isinstance(cause, BackPressureError):
                raise Overloaded("server overloaded: too many queued requests; retry later",
                                 self.limits.retry_after_s) from None
            message = message_of(exc)
            if "max_length" in message:
                raise PayloadTooLarge(message) from None
            raise BadRequest(message) from None
        except Exception as exc:
            from steadyrank.retrieval.shards import ShardUnavailableError  # here: the module loads FAISS and bm25s

            if isinstance(exc, ShardUnavailableError) or isinstance(root_cause(exc), ShardUnavailableError):
                raise Unavailable(f"index shard unavailable: {message_of(exc)}") from None
            raise

    async def _model_call(self, request: Request, model: str, units: int, deadline: float,
                          call: Callable[[], Awaitable[Any]]) -> Any:
        """:meth:`_call` to a model deployment under work-based admission (:mod:`serve.app.admission`):
        ``units`` (documents or texts) are refused at once, 503 + ``Retry-After``, when the work
        queued at ``model`` would keep them past ``limits.admission_headroom`` × the deadline. The
        request's body size per unit is noted first, for refusals before a body is read."""
        queue = self.work[model]
        queue.observe_body(declared_size(request), units)
        refused = self._work_refusal(model, units, deadline)
        if refused is not None:
            self.recorder.inc("steadyrank_requests_dropped_total", deployment="ingress", reason="overloaded")
            raise refused
        queue.start(units, time.monotonic())
        completed = False
        try:
            out = await self._call(deadline, call)
            completed = True
            return out
        finally:
            queue.finish(units, time.monotonic(), completed)

    def _work_refusal(self, model: str, units: int, deadline: float) -> Overloaded | None:
        """The 503 for a request of ``units`` at ``model`` that work-based admission refuses, or None."""
        queue = self.work[model]
        retry_after = queue.refusal(units, deadline)
        if retry_after is None:
            return None
        return Overloaded(f"server overloaded: the {model} has about {queue.predicted_wait(units):.0f} s of work "
                          f"queued, more than this request's deadline of {deadline:g} s allows; retry later", retry_after)

    def _refusal(self, endpoint: str, request: Request) -> tuple[str, ApiError] | None:
        """Why a new scoring request is refused before any work (the drop reason and the 503), or
        None: the server drains for shutdown; this replica has ``limits.max_in_flight`` in flight;
        or the endpoint's model has so much work queued that the request would be refused even
        under the longest deadline (:meth:`_work_refusal` with ``limits.request_timeout_s``: a
        request's own deadline is never longer) at the units its ``Content-Length`` holds by the
        low estimate of :meth:`WorkQueue.units_in` (1 without history or size), so an authorised
        request is refused before its body is read or parsed (a 100-document body is ~50 kB of
        JSON). Only then are its key and deadline read here; every other request is checked by
        its handler alone."""
        if self.draining:
            return "shutting_down", ShuttingDown("server shutting down: not taking new requests", self.limits.retry_after_s)
        if self.in_flight >= self.limits.max_in_flight:
            return "overloaded", Overloaded(f"server at capacity ({self.limits.max_in_flight} requests in flight); "
                                            "retry later", self.limits.retry_after_s)
        model = MODEL_OF_ENDPOINT.get(endpoint)
        if model is None:
            return None
        queue = self.work[model]
        units = queue.units_in(declared_size(request))
        if queue.refusal(units, self.limits.request_timeout_s) is None:
            return None
        try:
            self._authorize(request)
            deadline = self._deadline(request)
        except ApiError:  # the handler answers 401/400 as for any request
            return None
        return "overloaded", self._work_refusal(model, units, deadline)  # refused: deadline <= request_timeout_s

    async def _serve(self, endpoint: str, request: Request,
                     handler: Callable[[Request], Awaitable[Response]], record: bool = True) -> Response:
        started = time.perf_counter()
        refusal = self._refusal(endpoint, request) if record else None
        if refusal is not None:
            self.recorder.inc("steadyrank_requests_dropped_total", deployment="ingress", reason=refusal[0])
            response = refusal[1].response()
            await self._pace(refusal[1])
            self.recorder.inc("steadyrank_requests_total", endpoint=endpoint, code=str(response.status_code))
            return response
        self.in_flight += record
        error: ApiError | None = None
        try:
            response = await handler(request)
        except ApiError as exc:
            error = exc
        except Exception as exc:  # noqa: BLE001 - a bug must not take the replica down
            from ray.serve.exceptions import BackPressureError

            if isinstance(root_cause(exc), BackPressureError) or isinstance(exc, BackPressureError):
                error = Overloaded("server overloaded: too many queued requests; retry later", self.limits.retry_after_s)
            else:
                logger.exception("%s failed", endpoint)
                response = error_response(500, "internal_error", f"internal error: {type(root_cause(exc)).__name__}: "
                                                                 f"{message_of(exc)}")
        finally:
            self.in_flight -= record
        if error is not None:
            response = error.response()
            if record:
                await self._pace(error)
        if record:  # user traffic of the scoring endpoints only
            self.recorder.inc("steadyrank_requests_total", endpoint=endpoint, code=str(response.status_code))
            self.recorder.observe("steadyrank_request_duration_seconds", time.perf_counter() - started, endpoint=endpoint)
        return response

    async def _pace(self, error: ApiError) -> None:
        """Hold an overload 503 (not a shutdown one) until its turn under ``limits.refusals_per_s``
        (:class:`serve.app.admission.RefusalPacer`): the wait is on the event loop, no CPU."""
        if type(error) is Overloaded:
            wait = self.pacer.wait(time.monotonic())
            if wait > 0:
                await asyncio.sleep(wait)

    async def drain(self) -> dict[str, Any]:
        """Shutdown, step one (called by ``steadyrank serve`` on SIGTERM/SIGINT through the app
        handle, before any deployment stops): from now on this replica refuses new scoring requests
        (JSON 503 with ``Retry-After``) and ``/readyz`` answers 503 "draining". Returns this
        replica's id and its scoring requests and shadow hand-offs still in flight; the caller
        polls until they reach zero, so chained calls (ingress → Searcher → Embedder, Retriever,
        Reranker) finish before the deployments they need are torn down."""
        self.draining = True
        return {"replica": serve.get_replica_context().replica_id.unique_id,
                "in_flight": self.in_flight + len(self._background)}

    async def _model_facts(self, name: str, handle: Any) -> dict[str, Any]:
        if name not in self.facts:
            self.facts[name] = await handle.info.remote()
        return self.facts[name]

    def _check_query(self, query: str) -> None:
        if not query.strip():
            raise BadRequest("query must not be empty")
        if len(query) > self.limits.max_query_chars:
            raise PayloadTooLarge(f"query has {len(query)} characters, more than the limit of {self.limits.max_query_chars}")

    def _check_texts(self, texts: list[str], field: str, max_items: int) -> None:
        if len(texts) > max_items:
            raise PayloadTooLarge(f"{field} has {len(texts)} items, more than the limit of {max_items}")
        limit = self.limits.max_document_chars
        for i, text in enumerate(texts):
            if len(text) > limit:
                raise PayloadTooLarge(f"{field}[{i}] has {len(text)} characters, more than the limit of {limit}")

    # -- health -------------------------------------------------------------------------------

    @app.get("/healthz", response_model=protocol.HealthResponse, tags=["health"])
    async def healthz(self) -> dict[str, str]:
        """Alive (the ingress answers)."""
        return {"status": "ok"}

    @app.get("/readyz", response_model=protocol.ReadyResponse, tags=["health"],
             responses={503: {"model": protocol.ReadyResponse}})
    async def readyz(self) -> JSONResponse:
        """Ready: models loaded, index loaded, metrics hub reachable (503 otherwise). Degraded: a
        deployment has fewer RUNNING replicas than replicas (one died and is being replaced); 200
        while every deployment keeps one running, else 503; 503 while a node the cluster lists as
        alive does not answer (``checks.lost_nodes``; see ``serve.app.health``). Draining (shutting
        down, :meth:`drain`): 503."""
        if self.draining:
            return self._ready("draining", {"draining": True}, 503)
        try:
            health = await replica_health_async(serve.get_replica_context().app_name)
        except Exception:  # noqa: BLE001 — the controller is unreachable: the checks below decide
            health = None
        if health is not None and not health.healthy:
            checks = {"replicas": health.degraded, **({"lost_nodes": health.lost_nodes} if health.lost_nodes else {})}
            return self._ready("degraded", checks, 200 if health.serving else 503)
        try:
            checks = await asyncio.wait_for(self.searcher.ready.remote(), timeout=10.0)
            checks["metrics_hub"] = await asyncio.wait_for(self.hub.ready.remote(), timeout=5.0)
            if self.evaluator is not None:
                checks["evaluator"] = {"configured": True}
        except Exception as exc:  # noqa: BLE001
            return self._ready("not_ready", {"error": f"{type(root_cause(exc)).__name__}: {message_of(exc)}"}, 503)
        return self._ready("ready", checks, 200)

    @staticmethod
    def _ready(status: str, checks: dict[str, Any], code: int) -> JSONResponse:
        return JSON(protocol.ReadyResponse(status=status, checks=checks).model_dump(), status_code=code)

    @app.get("/metrics", tags=["health"], response_class=Response)
    async def metrics(self, request: Request) -> Response:
        """Prometheus text exposition of every replica's metrics (through the metrics hub)."""
        if self.settings.auth.protect_metrics:
            try:
                self._authorize(request)
            except ApiError as exc:
                return exc.response()
        body = await self.hub.render.remote()
        return Response(content=body, media_type=PROMETHEUS_CONTENT_TYPE)

    # -- models -------------------------------------------------------------------------------

    @app.get("/v1/models", tags=["models"], response_model=protocol.ModelList, responses=_errors(401))
    async def models(self, request: Request) -> Response:
        """The served models (OpenAI-shaped list)."""

        async def handle(_: Request) -> Response:
            self._authorize(request)
            embedder = await self._model_facts("embedder", self.embedder)
            reranker = await self._model_facts("reranker", self.reranker)
            served = [("embeddings", embedder, self.names.embedder[1:]), ("rerank", reranker, self.names.reranker[1:])]
            return JSON(protocol.ModelList.build(served).model_dump())

        return await self._serve("models", request, handle, record=False)

    # -- rerank -------------------------------------------------------------------------------

    @app.post("/v1/rerank", tags=["scoring"], openapi_extra=_schema(protocol.RerankRequest),
              response_model=protocol.RerankResponse,
              responses=_errors(400, 401, 404, 413, 422, 503, 504))
    async def rerank(self, request: Request) -> Response:
        """Cohere/Jina-shaped rerank. Results by score descending, ties by input index."""
        return await self._serve("rerank", request, self._rerank)

    async def _ranking(self, request: Request, query: str, texts: list[str], top_n: int | None, model: str | None,
                       field: str = "documents") -> dict[str, Any]:
        """The internal rerank path of every rerank dialect: limits, model name, the Reranker's
        ``rerank`` under the deadline. ``top_n`` is clamped to the number of texts."""
        deadline = self._deadline(request)
        self._check_query(query)
        if not texts:
            raise BadRequest(f"{field} must not be empty")
        self._check_texts(texts, field, self.limits.max_documents)
        self.names.resolve("reranker", model)
        top_n = min(top_n, len(texts)) if top_n is not None else None
        ends = time.time() + deadline
        return await self._model_call(request, "reranker", len(texts), deadline,
                                      lambda: self.reranker.rerank.remote(query, texts, top_n, deadline=ends))

    async def _rerank(self, request: Request) -> Response:
        self._authorize(request)
        body: protocol.RerankRequest = await self._parse(request, protocol.RerankRequest)
        texts = [document_text(d, body.rank_fields) for d in body.documents]
        out = await self._ranking(request, body.query, texts, body.top_n, body.model)
        return JSON(protocol.RerankResponse.build(out, body.documents, body.top_n, body.return_documents).model_dump())

    # -- client dialects: Cohere v2, TEI, Infinity -----------------------------------------

    @app.post("/v2/rerank", tags=["dialects"], openapi_extra=_schema(cohere.RerankV2Request),
              response_model=cohere.RerankV2Response,
              responses=_errors(400, 401, 404, 413, 422, 503, 504))
    async def rerank_v2(self, request: Request) -> Response:
        """Cohere v2 rerank (``cohere.ClientV2``, langchain-cohere ``CohereRerank``)."""
        return await self._serve("rerank_v2", request, self._rerank_v2)

    async def _rerank_v2(self, request: Request) -> Response:
        self._authorize(request)
        body: cohere.RerankV2Request = await self._parse(request, cohere.RerankV2Request)
        texts, cut = list(body.documents), []
        if body.max_tokens_per_doc is not None and texts:
            texts, cut = await asyncio.to_thread(self.reranker_tokens.cut, texts, body.max_tokens_per_doc)
        out = await self._ranking(request, body.query, texts, body.top_n, body.model)
        return JSON(cohere.v2_response(out, body.top_n, cut))

    @app.post("/rerank", tags=["dialects"], openapi_extra={"requestBody": {"required": True, "content": {
        "application/json": {"schema": {"oneOf": [
            tei.TeiRerankRequest.model_json_schema(ref_template="#/components/schemas/{model}"),
            infinity.InfinityRerankRequest.model_json_schema(ref_template="#/components/schemas/{model}")]}}}}},
        response_model=list[tei.TeiRank] | infinity.InfinityRerankResponse,
        responses={**_errors(401, 404), **{code: {"model": tei.RerankPathError} for code in (400, 413, 422, 503, 504)}})
    async def rerank_tei(self, request: Request) -> Response:
        """TEI rerank (``texts``; bare array, TEI errors) or Infinity rerank (``documents``), told
        apart by the body's keys."""
        return await self._serve("rerank_tei", request, self._rerank_tei)

    async def _rerank_tei(self, request: Request) -> Response:
        self._authorize(request)
        raw = await self._body(request)
        try:
            dialect = infinity.dialect_of(json.loads(raw))
        except ValueError:
            dialect = "tei"
        if dialect == "infinity":
            body = await self._parse_bytes(raw, infinity.InfinityRerankRequest)
            out = await self._ranking(request, body.query, body.documents, body.top_n, body.model)
            return JSON(infinity.rerank_response(out, body.documents, body.top_n, body.return_documents))
        try:
            tbody: tei.TeiRerankRequest = await self._parse_bytes(raw, tei.TeiRerankRequest)
            tei.check_direction(tbody.truncation_direction, self.settings.reranker_model.truncation_side)
            out = await self._ranking(request, tbody.query, tbody.texts, None, None, field="texts")
            max_length = (await self._model_facts("reranker", self.reranker))["max_length"]
            tei.check_untruncated(tbody.truncate, out["truncated"], "texts", max_length)
        except ApiError as exc:
            return tei.error_response(exc)
        return JSON(tei.rerank_response(out, tbody.texts, tbody.return_text))

    @app.post("/embed", tags=["dialects"], openapi_extra=_schema(tei.TeiEmbedRequest),
              response_model=list[list[float]],
              responses={**_errors(401), **{code: {"model": tei.TeiError} for code in (400, 413, 422, 503, 504)}})
    async def embed_tei(self, request: Request) -> Response:
        """TEI embed: ``{inputs}`` → ``[[float]]`` (L2-normalised)."""
        return await self._serve("embed_tei", request, self._embed_tei)

    async def _embed_tei(self, request: Request) -> Response:
        self._authorize(request)
        try:
            body: tei.TeiEmbedRequest = await self._parse(request, tei.TeiEmbedRequest)
            model = self.settings.embedder
            tei.check_direction(body.truncation_direction, model.truncation_side)
            texts = body.texts()
            self._check_embedding_texts(texts, isinstance(body.inputs, str), "inputs")
            if body.truncate is False:
                max_length = (await self._model_facts("embedder", self.embedder))["max_length"]
                counts = await asyncio.to_thread(self.embedder_tokens.count, texts)
                tei.check_untruncated(False, [i for i, c in enumerate(counts) if c > max_length], "inputs", max_length)
            deadline = self._deadline(request)
            ends = time.time() + deadline
            out = await self._model_call(request, "embedder", len(texts), deadline,
                                         lambda: self.embedder.embed.remote(texts, False, deadline=ends))
        except ApiError as exc:
            return tei.error_response(exc)
        return JSON(np.asarray(out["vectors"], dtype=np.float32).tolist())

    # -- search -------------------------------------------------------------------------------

    @app.post("/v1/search", tags=["scoring"], openapi_extra=_schema(protocol.SearchRequest),
              response_model=protocol.SearchResponse,
              responses=_errors(400, 401, 413, 422, 503, 504))
    async def search(self, request: Request) -> Response:
        """Retrieve (dense, BM25 or hybrid), rerank with dynamic K, return the top ``top_n``."""
        return await self._serve("search", request, self._search)

    async def _search(self, request: Request) -> Response:
        started = time.perf_counter()
        self._authorize(request)
        body: protocol.SearchRequest = await self._parse(request, protocol.SearchRequest)
        deadline = self._deadline(request)
        self._check_query(body.query)
        if body.top_n is not None and body.top_n > self.limits.max_top_n:
            raise BadRequest(f"top_n: must be ≤ {self.limits.max_top_n}, got {body.top_n}")
        call = protocol.SearchCall(query=body.query, top_n=body.top_n, mode=body.mode, denoise=body.denoise,
                                   return_documents=body.return_documents, deadline=time.time() + deadline)
        out: protocol.SearchOutcome = await self._call(deadline, lambda: self.searcher.search.remote(call))
        payload = protocol.SearchResponse.build(out, body.return_candidates).model_dump()
        background = None
        if self.evaluator is not None:
            outcome = out.model_dump()
            event = {
                "request": call.model_dump(),
                "query": body.query,
                "candidates": outcome["candidates"],
                "meta": outcome["meta"],
                "golden_query_id": request.headers.get("x-golden-query-id"),
                "latency_s": time.perf_counter() - started,
            }
            background = BackgroundTask(self._mirror, event)
        return JSON(payload, background=background)

    async def _mirror(self, event: dict[str, Any]) -> None:
        """Hand a served search to the shadow evaluator, detached from the request (runs after
        the response is sent; failures and a full evaluator queue are logged and dropped).

        Async on purpose: Starlette runs a sync background task in a worker thread, which has no
        event loop to start the detached task on."""

        async def send() -> None:
            try:
                await self.evaluator.mirror.remote(event)
            except Exception as exc:  # noqa: BLE001
                logger.debug("mirror dropped: %s: %s", type(root_cause(exc)).__name__, message_of(exc))

        task = asyncio.get_running_loop().create_task(send())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- embeddings ---------------------------------------------------------------------------

    @app.post("/v1/embeddings", tags=["scoring"], openapi_extra=_schema(protocol.EmbeddingRequest),
              response_model=protocol.EmbeddingResponse,
              responses=_errors(400, 401, 404, 413, 422, 503, 504))
    async def embeddings(self, request: Request) -> Response:
        """OpenAI-shaped embeddings (L2-normalised; FP32-normalised under HPS)."""
        return await self._serve("embeddings", request, self._embeddings)

    async def _embeddings(self, request: Request) -> Response:
        self._authorize(request)
        body: protocol.EmbeddingRequest = await self._parse(request, protocol.EmbeddingRequest)
        deadline = self._deadline(request)
        texts = body.texts()
        self._check_embedding_texts(texts, isinstance(body.input, str), "input")
        served = self.names.resolve("embedder", body.model)
        embedding_dialect.check_dimensions(body.dimensions, self.names.embedder_dim, self.names.matryoshka, served)
        ends = time.time() + deadline
        out = await self._model_call(request, "embedder", len(texts), deadline,
                                     lambda: self.embedder.embed.remote(texts, True, deadline=ends))
        vectors = embedding_dialect.shorten(out["vectors"], body.dimensions)
        response = protocol.EmbeddingResponse.build(vectors, int(out["tokens"] or 0), served, body.encoding_format)
        return JSON(response.model_dump())

    def _check_embedding_texts(self, texts: list[str], single: bool, field: str) -> None:
        """Embedding inputs: at least one, none blank, within the limits."""
        if not texts:
            raise BadRequest(f"{field} must not be empty")
        for i, text in enumerate(texts):
            if not text.strip():
                raise BadRequest(f"{field} must not be empty" if single else f"{field}[{i}] must not be empty")
        self._check_texts(texts, field, self.limits.max_embedding_inputs)

    # -- quality (issue 6) --------------------------------------------------------------------

    @app.get("/v1/canary", tags=["quality"], responses=_errors(400, 401, 404, 503, 504))
    async def canary(self, request: Request) -> Response:
        """The canary comparison of the shadow evaluator (deltas, CIs, verdict)."""

        async def handle(_: Request) -> Response:
            self._authorize(request)
            if self.evaluator is None:
                raise NotFound("the shadow evaluator is off (quality.enabled: false)")
            return JSON(await self._call(self._deadline(request), lambda: self.evaluator.canary_report.remote()))

        return await self._serve("canary", request, handle, record=False)

    @app.get("/v1/quality", tags=["quality"], responses=_errors(400, 401, 404, 503, 504))
    async def quality(self, request: Request) -> Response:
        """The shadow evaluator's status: windows, counts, last success."""

        async def handle(_: Request) -> Response:
            self._authorize(request)
            if self.evaluator is None:
                raise NotFound("the shadow evaluator is off (quality.enabled: false)")
            return JSON(await self._call(self._deadline(request), lambda: self.evaluator.status.remote()))

        return await self._serve("quality", request, handle, record=False)

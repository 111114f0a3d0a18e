"""The HTTP ingress: FastAPI on Ray Serve (``@serve.ingress``).

Routes: ``POST /v1/rerank``, ``POST /v1/search``, ``POST /v1/embeddings``, ``GET /v1/models``,
``GET /v1/canary``, ``GET /v1/quality`` (scoring routes: bearer API key when keys are configured),
``GET /healthz``, ``GET /readyz``, ``GET /metrics`` (open unless ``auth.protect_metrics``).

Each scoring request: API key (constant-time) → body read with a size cap (413) → schema (422,
naming the field; 400 for broken JSON) → emptiness (400) and size limits (413) → the deployment
call under a deadline (504; ``X-Request-Timeout`` may shorten it) → JSON. A full queue downstream
(``max_queued_requests``) answers 503 with ``Retry-After``. Every outcome is counted in
``steadyrank_requests_total{endpoint, code}`` and timed in ``steadyrank_request_duration_seconds``.
After a ``/v1/search`` response is sent, the shadow evaluator (when configured) gets a copy of the
request and its reranked candidates, fire-and-forget.
"""

# No `from __future__ import annotations` here: FastAPI must see real annotations on the routes
# that Ray Serve's ingress wraps (a string annotation `Request` would become a query parameter).
import asyncio
import base64
import hmac
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError
from ray import serve as ray_serve
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException as StarletteHTTPException

from steadyrank.serve.app import protocol
from steadyrank.serve.commands.output import json_safe
from steadyrank.serve.app.errors import (
    ApiError,
    BadRequest,
    NotFound,
    Overloaded,
    PayloadTooLarge,
    Timeout,
    Unauthorized,
    Unavailable,
    error_response,
    schema_error,
)
from steadyrank.serve.app.settings import Settings, load_settings
from steadyrank.serve.app.telemetry import Recorder

logger = logging.getLogger("steadyrank.ingress")

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MODEL_ALIASES = ("default", "steadyrank")

app = FastAPI(
    title="steadyrank",
    description="Reranking middleware with High-Precision Scoring, tie facts and dynamic-K search.",
    version="0.1.0",
)


@app.exception_handler(StarletteHTTPException)
async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
    kind = {404: "not_found_error", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request_error")
    return error_response(exc.status_code, kind, str(exc.detail), getattr(exc, "headers", None))


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


def message_of(exc: BaseException) -> str:
    cause = root_cause(exc)
    return str(cause.args[0]) if cause.args else type(cause).__name__


@ray_serve.deployment(name="Ingress")
@ray_serve.ingress(app)
class Ingress:
    """HTTP front: validation, limits, auth, deadlines, metrics; the work happens in the handles."""

    def __init__(self, settings: Settings | dict, searcher: Any, embedder: Any, reranker: Any, retriever: Any,
                 hub: Any, evaluator: Any = None) -> None:
        settings = load_settings(settings)
        self.settings = settings
        self.limits = settings.limits
        self.searcher, self.embedder, self.reranker, self.retriever = searcher, embedder, reranker, retriever
        self.hub, self.evaluator = hub, evaluator
        self.keys = [k.encode("utf-8") for k in settings.auth.resolved_keys()]
        self.recorder = Recorder(hub, flush_interval_s=settings.telemetry.flush_interval_s)
        self.facts: dict[str, dict[str, Any]] = {}
        self._background: set[asyncio.Task] = set()

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
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise PayloadTooLarge(f"request body of {declared} bytes exceeds the limit of {limit} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def _parse(self, request: Request, model: type[BaseModel]) -> Any:
        body = await self._body(request)
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

    async def _call(self, deadline: float, work: Awaitable[Any]) -> Any:
        """Await a deployment call under ``deadline``, mapping Ray's errors to HTTP ones."""
        from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError

        from steadyrank.serve.app.deployments import InvalidRequest

        try:
            return await asyncio.wait_for(work, timeout=deadline)
        except asyncio.TimeoutError:
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
            from steadyrank.retrieval.shards import ShardUnavailableError

            if isinstance(root_cause(exc), ShardUnavailableError) or isinstance(exc, ShardUnavailableError):
                raise Unavailable(f"index shard unavailable: {message_of(exc)}") from None
            raise

    async def _serve(self, endpoint: str, request: Request,
                     handler: Callable[[Request], Awaitable[Response]], record: bool = True) -> Response:
        started = time.perf_counter()
        try:
            response = await handler(request)
        except ApiError as exc:
            response = exc.response()
        except Exception as exc:  # noqa: BLE001 - a bug must not take the replica down
            from ray.serve.exceptions import BackPressureError

            if isinstance(root_cause(exc), BackPressureError) or isinstance(exc, BackPressureError):
                response = Overloaded("server overloaded: too many queued requests; retry later",
                                      self.limits.retry_after_s).response()
            else:
                logger.exception("%s failed", endpoint)
                response = error_response(500, "internal_error", f"internal error: {type(root_cause(exc)).__name__}: "
                                                                 f"{message_of(exc)}")
        if record:  # user traffic of the scoring endpoints only
            self.recorder.inc("steadyrank_requests_total", endpoint=endpoint, code=str(response.status_code))
            self.recorder.observe("steadyrank_request_duration_seconds", time.perf_counter() - started, endpoint=endpoint)
        return response

    async def _model_facts(self, name: str, handle: Any) -> dict[str, Any]:
        if name not in self.facts:
            self.facts[name] = await handle.info.remote()
        return self.facts[name]

    def _check_model(self, requested: str | None, served: str) -> None:
        if requested and requested not in (served, *MODEL_ALIASES):
            raise NotFound(f"model {requested!r} is not served here; this endpoint serves {served!r}")

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
        """Ready: models loaded, index loaded, metrics hub reachable (503 otherwise)."""
        try:
            checks = await asyncio.wait_for(self.searcher.ready.remote(), timeout=10.0)
            checks["metrics_hub"] = await asyncio.wait_for(self.hub.ready.remote(), timeout=5.0)
            if self.evaluator is not None:
                checks["evaluator"] = {"configured": True}
        except Exception as exc:  # noqa: BLE001
            return JSON({"status": "not_ready", "checks": {"error": f"{type(root_cause(exc)).__name__}: "
                                                                            f"{message_of(exc)}"}}, status_code=503)
        return JSON({"status": "ready", "checks": checks})

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

    @app.get("/v1/models", tags=["models"])
    async def models(self, request: Request) -> Response:
        """The served models (OpenAI-shaped list)."""

        async def handle(_: Request) -> Response:
            self._authorize(request)
            embedder = await self._model_facts("embedder", self.embedder)
            reranker = await self._model_facts("reranker", self.reranker)
            data = [{"id": embedder["model"], "object": "model", "owned_by": "steadyrank", "task": "embeddings", **embedder},
                    {"id": reranker["model"], "object": "model", "owned_by": "steadyrank", "task": "rerank", **reranker}]
            return JSON({"object": "list", "data": data})

        return await self._serve("models", request, handle, record=False)

    # -- rerank -------------------------------------------------------------------------------

    @app.post("/v1/rerank", tags=["scoring"], openapi_extra=_schema(protocol.RerankRequest),
              response_model=protocol.RerankResponse,
              responses=_errors(400, 401, 404, 413, 422, 503, 504))
    async def rerank(self, request: Request) -> Response:
        """Cohere/Jina-shaped rerank. Results by score descending, ties by input index."""
        return await self._serve("rerank", request, self._rerank)

    async def _rerank(self, request: Request) -> Response:
        self._authorize(request)
        body: protocol.RerankRequest = await self._parse(request, protocol.RerankRequest)
        deadline = self._deadline(request)
        self._check_query(body.query)
        if not body.documents:
            raise BadRequest("documents must not be empty")
        self._check_texts(body.documents, "documents", self.limits.max_documents)
        facts = await self._model_facts("reranker", self.reranker)
        self._check_model(body.model, facts["model"])
        n = len(body.documents)
        top_n = min(body.top_n, n) if body.top_n is not None else None
        out = await self._call(deadline, self.reranker.rerank.remote(body.query, body.documents, top_n))
        scores = out["scores"]
        results = []
        for i in out["order"][: top_n if top_n is not None else n]:
            item: dict[str, Any] = {"index": int(i), "relevance_score": float(scores[i])}
            if body.return_documents:
                item["document"] = {"text": body.documents[i]}
            results.append(item)
        return JSON({
            "id": str(uuid.uuid4()),
            "model": out["model"],
            "results": results,
            "meta": {
                "precision": out["precision"],
                "scoring": out["scoring"],
                "tie_groups": out["tie_groups"],
                "tie_at_cutoff": bool(out["tie_at_cutoff"]),
                "rescored_ties": int(out["rescored"]),
                "truncated": out["truncated"],
            },
        })

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
        call = {"query": body.query, "top_n": body.top_n, "mode": body.mode,
                "return_documents": body.return_documents}
        out = await self._call(deadline, self.searcher.search.remote(call))
        payload: dict[str, Any] = {"id": str(uuid.uuid4()), "results": out["results"], "meta": out["meta"]}
        if body.return_candidates:
            payload["candidates"] = out["candidates"]
        background = None
        if self.evaluator is not None:
            event = {
                "request": call,
                "query": body.query,
                "candidates": out["candidates"],
                "meta": out["meta"],
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
        texts = [body.input] if isinstance(body.input, str) else list(body.input)
        if not texts:
            raise BadRequest("input must not be empty")
        for i, text in enumerate(texts):
            if not text.strip():
                raise BadRequest(f"input[{i}] must not be empty" if len(texts) > 1 or not isinstance(body.input, str)
                                 else "input must not be empty")
        self._check_texts(texts, "input", self.limits.max_embedding_inputs)
        facts = await self._model_facts("embedder", self.embedder)
        self._check_model(body.model, facts["model"])
        if body.dimensions is not None and body.dimensions != facts["dim"]:
            raise BadRequest(f"dimensions: {facts['model']} has {facts['dim']} dimensions and cannot be shortened; "
                             f"got {body.dimensions}")
        out = await self._call(deadline, self.embedder.embed.remote(texts, True))
        vectors = np.asarray(out["vectors"], dtype=np.float32)
        if body.encoding_format == "base64":
            data = [{"object": "embedding", "index": i, "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode()}
                    for i, v in enumerate(vectors)]
        else:
            data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
        tokens = int(out["tokens"] or 0)
        return JSON({"object": "list", "data": data, "model": facts["model"],
                             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    # -- quality (issue 6) --------------------------------------------------------------------

    @app.get("/v1/canary", tags=["quality"])
    async def canary(self, request: Request) -> Response:
        """The canary comparison of the shadow evaluator (deltas, CIs, verdict)."""

        async def handle(_: Request) -> Response:
            self._authorize(request)
            if self.evaluator is None:
                raise NotFound("the shadow evaluator is off (quality.enabled: false)")
            return JSON(await self._call(self._deadline(request), self.evaluator.canary_report.remote()))

        return await self._serve("canary", request, handle, record=False)

    @app.get("/v1/quality", tags=["quality"])
    async def quality(self, request: Request) -> Response:
        """The shadow evaluator's status: windows, counts, last success."""

        async def handle(_: Request) -> Response:
            self._authorize(request)
            if self.evaluator is None:
                raise NotFound("the shadow evaluator is off (quality.enabled: false)")
            return JSON(await self._call(self._deadline(request), self.evaluator.status.remote()))

        return await self._serve("quality", request, handle, record=False)

"""steadyrank's own routes: ``/v1/rerank`` (Cohere/Jina shape), ``/v1/search``, ``/v1/embeddings``
(OpenAI shape), ``/v1/models``."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from steadyrank.serve.server.calls import SearchCall
from steadyrank.serve.server.http import schemas
from steadyrank.serve.server.http.deps import AdmittedBody, Role, authorised, endpoint, scoring_post
from steadyrank.serve.server.http.dialects import embeddings as embedding_dialect
from steadyrank.serve.server.http.live_samples import rerank_sample, search_sample
from steadyrank.serve.server.http.responses import JSON, errors, ignored_fields_header
from steadyrank.serve.server.http.scoring import check_query, check_top_n
from steadyrank.serve.server.http.state import parts_of

router = APIRouter()


@scoring_post(router, "/v1/rerank", "rerank", schemas.RerankRequest, schemas.RerankResponse,
              errors(400, 401, 404, 408, 413, 422, 503, 504))
async def rerank(request: Request, raw: AdmittedBody) -> Response:
    """Cohere/Jina-shaped rerank. Results by score descending, ties by input index."""
    app = parts_of(request)
    body = app.scoring.parse(raw, schemas.RerankRequest)
    # every limit that needs no rendering is checked before object documents are rendered
    texts = await app.scoring.rerank_texts(request, body.query, body.documents, body.model, body.instruction,
                                           body.rank_fields)
    out = await app.scoring.rerank(request, body.query, texts, body.top_n, instruction=body.instruction,
                                   max_chunks_per_doc=body.max_chunks_per_doc)
    ignored = body.ignored_fields()
    response = schemas.RerankResponse.build(out, body.documents, body.top_n, bool(body.return_documents),
                                             ignored).model_dump()
    sample = rerank_sample(app.services.settings, body.query, texts, out, body.top_n, request.state.request_id)
    if sample is not None and app.services.evaluator is not None:
        app.gateway.detach(app.services.evaluator.judge_live.remote(sample), "live judging sample")
    return JSON({**response, "id": request.state.request_id}, headers=ignored_fields_header(ignored))


@scoring_post(router, "/v1/search", "search", schemas.SearchRequest, schemas.SearchResponse,
              errors(400, 401, 408, 413, 422, 503, 504))
async def search(request: Request, raw: AdmittedBody, role: Annotated[Role, Depends(authorised)]) -> Response:
    """Retrieve (dense, BM25 or hybrid), rerank with dynamic K, return the top ``top_n``. The
    `quality.segments.header` header (default `X-Steadyrank-Segment`) names the request's segment:
    which reranker serves it follows the segment's canary verdict and guards (`meta.variant`,
    `meta.reranked`; docs/guides/quality.md "Per-segment verdicts and guards")."""
    started = time.perf_counter()
    app = parts_of(request)
    routing, evaluator = app.segments, app.services.evaluator
    segment = routing.segment(request)  # a malformed segment header is refused before the body is parsed
    limits = app.services.settings.limits
    body = app.scoring.parse(raw, schemas.SearchRequest)
    check_query(limits, body.query)
    check_top_n(limits, body.top_n)
    if evaluator is not None and routing.stale():
        app.gateway.detach(routing.refresh(evaluator), "segment routes")
    variant, rerank = routing.route(segment)
    deadline = app.gateway.deadline(request)
    call = SearchCall(query=body.query, top_n=body.top_n, mode=body.mode, denoise=body.denoise,
                      return_documents=body.return_documents, deadline=deadline, variant=variant,
                      rerank=rerank)
    out = await app.scoring.search(request, call, deadline)
    payload = schemas.SearchResponse.build(out, body.return_candidates).model_dump()
    payload["id"] = request.state.request_id
    if evaluator is not None:
        outcome = out.model_dump()
        event = {"request": call.model_dump(), "query": body.query, "candidates": outcome["candidates"],
                 "meta": outcome["meta"], "golden_query_id": request.headers.get("x-golden-query-id"),
                 "golden_trusted": role == "admin", "latency_s": time.perf_counter() - started,
                 "request_id": request.state.request_id,
                 "live_sample": search_sample(app.services.settings, body.query, call, out, request.state.request_id)}
        app.gateway.detach(evaluator.mirror.remote(event), "mirror")
    return JSON(payload, headers=ignored_fields_header(body.ignored_fields()))


@scoring_post(router, "/v1/embeddings", "embeddings", schemas.EmbeddingRequest, schemas.EmbeddingResponse,
              errors(400, 401, 404, 408, 413, 422, 503, 504))
async def embeddings(request: Request, raw: AdmittedBody) -> Response:
    """OpenAI-shaped embeddings (L2-normalised; FP32-normalised under HPS)."""
    app = parts_of(request)
    app.gateway.timeout_s(request)  # a bad X-Request-Timeout is refused before any work
    body = app.scoring.parse(raw, schemas.EmbeddingRequest)
    texts = body.texts()
    app.scoring.check_embedding_texts(texts, isinstance(body.input, str), "input")
    names = app.services.names
    served = names.resolve("embedder", body.model)
    embedding_dialect.check_dimensions(body.dimensions, names.embedder_dim, names.matryoshka, served)
    out = await app.scoring.embed(request, texts, True, body.prompt_request())
    vectors = embedding_dialect.shorten(out.vectors, body.dimensions)
    return JSON(schemas.EmbeddingResponse.payload(vectors, int(out.tokens or 0), served, body.encoding_format or "float"),
                headers=ignored_fields_header(body.ignored_fields()))


@router.get("/v1/models", tags=["models"], response_model=schemas.ModelList, responses=errors(401),
            dependencies=[Depends(endpoint("models", record=False)), Depends(authorised)])
async def models(request: Request) -> Response:
    """The served models (OpenAI-shaped list)."""
    app = parts_of(request)
    names = app.services.names
    embedder = await app.gateway.model_facts("embedder")
    reranker = await app.gateway.model_facts("reranker")
    served: list[tuple[Literal["embeddings", "rerank"], dict[str, Any], tuple[str, ...]]] = [
        ("embeddings", embedder, names.embedder[1:]), ("rerank", reranker, names.reranker[1:])]
    return JSON(schemas.ModelList.build(served).model_dump())

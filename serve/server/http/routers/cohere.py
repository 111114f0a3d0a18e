"""Cohere's rerank API v2: ``POST /v2/rerank`` (``cohere.ClientV2``, langchain-cohere ``CohereRerank``)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from steadyrank.serve.server.http.deps import AdmittedBody, scoring_post
from steadyrank.serve.server.http.dialects import cohere
from steadyrank.serve.server.http.responses import JSON, errors
from steadyrank.serve.server.http.state import parts_of

router = APIRouter()


@scoring_post(router, "/v2/rerank", "rerank_v2", cohere.RerankV2Request, cohere.RerankV2Response,
              errors(400, 401, 404, 408, 413, 422, 503, 504), tags="dialects")
async def rerank_v2(request: Request, raw: AdmittedBody) -> Response:
    """Cohere v2 rerank. Every limit is checked before ``max_tokens_per_doc`` tokenises a document;
    the tokenising runs off the event loop."""
    app = parts_of(request)
    body = app.scoring.parse(raw, cohere.RerankV2Request)
    texts = await app.scoring.rerank_texts(request, body.query, body.documents, body.model, body.instruction)
    cut: list[int] = []
    if body.max_tokens_per_doc is not None:
        # off the event loop, under the request's deadline
        texts, cut = await app.scoring.within(request, app.services.reranker_tokens.cut, texts, body.max_tokens_per_doc)
    out = await app.scoring.rerank(request, body.query, texts, body.top_n, instruction=body.instruction,
                                   max_chunks_per_doc=body.max_chunks_per_doc)
    return JSON({**cohere.v2_response(out, body.top_n, cut), "id": request.state.request_id})

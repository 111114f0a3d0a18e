"""Hugging Face Text Embeddings Inference: ``POST /rerank`` (TEI's body, or Infinity's: told apart by
its keys) and ``POST /embed``. TEI requests get TEI's error body (``request.state.dialect``)."""

from __future__ import annotations

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import Response

from steadyrank.serve.server.http.deps import AdmittedBody, scoring_post
from steadyrank.serve.server.http.dialects import infinity, tei
from steadyrank.serve.server.http.responses import JSON, errors
from steadyrank.serve.server.http.routers import infinity as infinity_router
from steadyrank.serve.server.http.scoring import decode
from steadyrank.serve.server.http.state import parts_of

router = APIRouter()

_SCHEMA_REF = "#/components/schemas/{model}"


@scoring_post(router, "/rerank", "rerank_tei", tei.TeiRerankRequest, list[tei.TeiRank] | infinity.InfinityRerankResponse,
              {**errors(401, 404), **{code: {"model": tei.RerankPathError} for code in (400, 408, 413, 422, 503, 504)}},
              tags="dialects", openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                  "schema": {"oneOf": [tei.TeiRerankRequest.model_json_schema(ref_template=_SCHEMA_REF),
                                       infinity.InfinityRerankRequest.model_json_schema(ref_template=_SCHEMA_REF)]}}}}})
async def rerank(request: Request, raw: AdmittedBody) -> Response:
    """TEI rerank (``texts``; bare array, TEI errors) or Infinity rerank (``documents``)."""
    # the body is decoded once, its keys tell the dialect, and it is validated as that dialect's
    # request (a body that is not JSON is TEI's to refuse)
    request.state.dialect = "tei"
    document = decode(raw)
    if infinity.dialect_of(document) == "infinity":
        request.state.dialect = "native"
        return await infinity_router.rerank(request, document)
    app = parts_of(request)
    body = app.scoring.validate(document, tei.TeiRerankRequest)
    tei.check_direction(body.truncation_direction, app.services.settings.reranker_model.truncation_side)
    texts = await app.scoring.rerank_texts(request, body.query, body.texts, None, field="texts")
    out = await app.scoring.rerank(request, body.query, texts, None, max_chunks_per_doc=body.max_chunks_per_doc)
    max_length = (await app.gateway.model_facts("reranker"))["max_length"]
    tei.check_untruncated(body.truncate, out.truncated, "texts", max_length)
    return JSON(tei.rerank_response(out, body.texts, body.return_text))


@scoring_post(router, "/embed", "embed_tei", tei.TeiEmbedRequest, list[list[float]],
              {code: {"model": tei.TeiError} for code in (400, 401, 408, 413, 422, 503, 504)}, tags="dialects", dialect="tei")
async def embed(request: Request, raw: AdmittedBody) -> Response:
    """TEI embed: ``{inputs}`` → ``[[float]]`` (L2-normalised)."""
    app = parts_of(request)
    body = app.scoring.parse(raw, tei.TeiEmbedRequest)
    tei.check_direction(body.truncation_direction, app.services.settings.embedder.truncation_side)
    texts = body.texts()
    app.scoring.check_embedding_texts(texts, isinstance(body.inputs, str), "inputs")
    if body.truncate is False:
        max_length = (await app.gateway.model_facts("embedder"))["max_length"]
        counts = await app.scoring.within(request, app.services.embedder_tokens.count, texts)
        tei.check_untruncated(False, [i for i, c in enumerate(counts) if c > max_length], "inputs", max_length)
    out = await app.scoring.embed(request, texts, False, {"prompt_name": body.prompt_name})
    return JSON(np.asarray(out.vectors, dtype=np.float32).astype(np.float64))  # FP32 values, written in C

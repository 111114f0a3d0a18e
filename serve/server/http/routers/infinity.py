"""Infinity's rerank body on TEI's path (``POST /rerank`` with ``documents``): the handler the TEI
router hands such bodies to (:func:`rerank`); errors in steadyrank's shape."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import Response

from steadyrank.serve.server.http.dialects import infinity
from steadyrank.serve.server.http.responses import JSON
from steadyrank.serve.server.http.state import parts_of


async def rerank(request: Request, document: Any) -> Response:
    """An Infinity body, already decoded (:func:`~serve.server.http.scoring.decode`)."""
    scoring = parts_of(request).scoring
    body = scoring.validate(document, infinity.InfinityRerankRequest)
    texts = await scoring.rerank_texts(request, body.query, body.documents, body.model)
    out = await scoring.rerank(request, body.query, texts, body.top_n, max_chunks_per_doc=body.max_chunks_per_doc)
    response = infinity.rerank_response(out, body.documents, body.top_n, body.return_documents)
    return JSON({**response, "id": request.state.request_id})

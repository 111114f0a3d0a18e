"""Infinity's rerank body on TEI's path: ``POST /rerank`` with ``documents`` (not ``texts``).

Request ``{query, documents, model?, top_n?, return_documents?, raw_scores?}`` → response
``{object: "rerank", id, created, model, data: [{index, relevance_score, document?}]}`` in served
order. ``max_chunks_per_doc`` (chunked reranking) is steadyrank's extension, each result then
naming its winning ``chunk``. Infinity's ``usage`` is not returned (rerank tokens are not counted here). ``raw_scores:
true`` is refused (422); unknown fields → 422. :func:`dialect_of` tells the two bodies apart.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from steadyrank.serve.server.calls import CALIBRATED_SCORE, RerankOutcome
from steadyrank.serve.server.http.dialects.schema_limits import limited
from steadyrank.serve.server.http.dialects.tei import _refuse_true
from steadyrank.serve.server.http.schemas import (
    CHUNKS_DOC,
    ChunkFacts,
    DocumentText,
    Flag,
    MaxChunksPerDoc,
    PositiveInteger,
    Query,
)


class InfinityRerankRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: Query
    documents: list[DocumentText] = Field(..., json_schema_extra={"minItems": 1, **limited(maxItems="max_documents")})
    model: str | None = Field(None, description="a served model name; omitted = the served reranker",
                              json_schema_extra=limited(enum="reranker_names"))
    top_n: PositiveInteger | None = None
    return_documents: Flag | None = False
    raw_scores: Flag | None = Field(False, description="only false", json_schema_extra={"enum": [False, None]})
    max_chunks_per_doc: MaxChunksPerDoc | None = Field(None, description="steadyrank's extension: " + CHUNKS_DOC)

    _raw = _refuse_true("raw_scores", "raw logits are not returned; scores are φ of the FP32 logit")


class InfinityRank(BaseModel):
    index: int
    relevance_score: float
    document: str | None = None
    calibrated_score: float | None = Field(None, description=f"steadyrank's extension (not Infinity's): "
                                                             f"{CALIBRATED_SCORE}")
    chunk: ChunkFacts | None = Field(None, description="steadyrank's extension: the winning chunk (chunked reranking)")


class InfinityRerankResponse(BaseModel):
    object: Literal["rerank"] = "rerank"
    id: str
    created: int
    model: str
    data: list[InfinityRank]


def dialect_of(body: Any) -> Literal["tei", "infinity"]:
    """An object with ``documents`` and no ``texts`` is Infinity's; anything else is TEI's."""
    return "infinity" if isinstance(body, dict) and "documents" in body and "texts" not in body else "tei"


def rerank_response(out: RerankOutcome, documents: list[str], top_n: int | None,
                    return_documents: bool | None) -> dict[str, Any]:
    scores = out.scores
    data = []
    for i in out.served_order(top_n):
        item: dict[str, Any] = {"index": i, "relevance_score": float(scores[i]), **out.calibrated_field(i)}
        if return_documents:
            item["document"] = documents[i]
        if (chunk := out.chunk_facts(i)) is not None:
            item["chunk"] = chunk
        data.append(item)
    return {"object": "rerank", "id": str(uuid.uuid4()), "created": int(time.time()), "model": out.model,
            "data": data}

"""Cohere's rerank API, v2 (``POST /v2/rerank``, what ``cohere.ClientV2`` and langchain-cohere's
``CohereRerank`` call). The v1 extras (``rank_fields``, object documents, ``max_chunks_per_doc``)
live on ``/v1/rerank``'s request model and :func:`..documents.document_text`.

v2 request ``{model, query, documents: [str], top_n?, max_tokens_per_doc?}`` → response
``{id, results: [{index, relevance_score}], meta: {api_version, billed_units, steadyrank}}``;
``meta.steadyrank`` holds the precision and tie facts of ``/v1/rerank``'s meta plus the documents
cut to ``max_tokens_per_doc`` (and, with chunked reranking, the winning chunks). ``max_chunks_per_doc``
(chunked reranking, Cohere v1's field) and ``instruction`` are steadyrank's extensions (as on ``/v1/rerank``: a
causal-LM reranker's task instruction). Unknown fields are refused (422 naming them).
"""

from __future__ import annotations

import math
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from steadyrank.serve.server.calls import CALIBRATED_SCORE, RerankOutcome
from steadyrank.serve.server.http.dialects.schema_limits import limited
from steadyrank.serve.server.http.schemas import (
    CHUNKS_DOC,
    DocumentText,
    MaxChunksPerDoc,
    PositiveInteger,
    Query,
    RerankInstruction,
    RerankMeta,
)

DOCUMENTS_PER_SEARCH_UNIT = 100  # Cohere bills one search unit per query and ≤ 100 documents


class RerankV2Request(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(None, description="a served model name (see GET /v1/models); omitted = the served "
                                                "reranker", json_schema_extra=limited(enum="reranker_names"))
    query: Query
    documents: list[DocumentText] = Field(..., json_schema_extra={"minItems": 1, **limited(maxItems="max_documents")})
    top_n: PositiveInteger | None = Field(None, description="results to return (default: all)")
    max_tokens_per_doc: PositiveInteger | None = Field(
        None, description="cut each document to its first max_tokens_per_doc tokens of the reranker's tokenizer "
                          "before scoring (Cohere's default 4096 ≥ every served max_length, so omitted = no cut); "
                          "meta.steadyrank.cut_to_max_tokens lists the cut documents")
    max_chunks_per_doc: MaxChunksPerDoc | None = Field(None, description="steadyrank's extension (Cohere v1's "
                                                                          "field): " + CHUNKS_DOC)
    instruction: RerankInstruction | None = Field(
        None, description="steadyrank's extension (not Cohere's): the task instruction of this request, replacing the "
                          "model's own (causal-LM rerankers, instruction-tuned bi-encoders; others refuse it, 400)")


class RerankV2Result(BaseModel):
    index: int
    relevance_score: float
    calibrated_score: float | None = Field(None, description=f"steadyrank's extension (not Cohere's): {CALIBRATED_SCORE}")


class ApiVersion(BaseModel):
    version: str = "2"


class BilledUnits(BaseModel):
    search_units: int = Field(..., description="Cohere's unit: one per query and started 100 documents "
                                               "(nothing is billed here)")


class SteadyrankFacts(RerankMeta):
    model: str = Field(..., description="the served model id")
    cut_to_max_tokens: list[int] = Field(..., description="documents cut to max_tokens_per_doc")


class RerankV2Meta(BaseModel):
    api_version: ApiVersion
    billed_units: BilledUnits
    steadyrank: SteadyrankFacts


class RerankV2Response(BaseModel):
    id: str
    results: list[RerankV2Result]
    meta: RerankV2Meta


def v2_response(out: RerankOutcome, top_n: int | None, cut: list[int]) -> dict[str, Any]:
    """The v2 response of one internal ranking (``Reranker.rerank``'s result)."""
    scores = out.scores
    n = len(scores)
    return {
        "id": str(uuid.uuid4()),
        "results": [{"index": i, "relevance_score": float(scores[i]), **out.calibrated_field(i)}
                    for i in out.served_order(top_n)],
        "meta": {
            "api_version": {"version": "2"},
            "billed_units": {"search_units": max(1, math.ceil(n / DOCUMENTS_PER_SEARCH_UNIT))},
            "steadyrank": {**{k: v for k, v in out.tie_facts(top_n).items() if not (k == "chunks" and v is None)},
                           **out.calibration_facts(), "model": out.model, "cut_to_max_tokens": cut},
        },
    }

"""Request and response schemas of the HTTP API, in one module (as vLLM's OpenAI protocol).

- ``POST /v1/rerank``: Cohere/Jina-shaped. Results are sorted by score descending; equal scores
  keep input order (lower ``index`` first) — except a tie straddling ``top_n`` that boundary
  re-scoring settled with FP32 forward scores (``meta.rescored_ties`` > 0).
- ``POST /v1/search``: retrieve, rerank with dynamic K, return the top ``top_n``.
- ``POST /v1/embeddings``: OpenAI-shaped.

Unknown request fields are ignored (clients of other rerank APIs send extras); limits that
depend on the server's settings are checked by the ingress after the schema (400/413).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Mode = Literal["dense", "bm25", "hybrid"]


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class TextDocument(BaseModel):
    """A document given as an object (Cohere ``{"text": ...}``)."""

    text: str


# ---------------------------------------------------------------------------------------------
# /v1/rerank


class RerankRequest(_Request):
    model: str | None = Field(None, description="model id (the served reranker's id or 'default'); optional")
    query: str = Field(..., description="the query")
    documents: list[str] = Field(..., description="strings or objects {\"text\": str}")
    top_n: int | None = Field(None, ge=1, description="results to return (default: all)")
    return_documents: bool = Field(False, description="include each document's text in the results")

    @field_validator("documents", mode="before")
    @classmethod
    def _texts(cls, value: Any) -> Any:
        if not isinstance(value, list):
            raise ValueError("must be a list of strings or of objects {\"text\": string}")
        texts = []
        for i, item in enumerate(value):
            if isinstance(item, str):
                texts.append(item)
            elif isinstance(item, dict) and isinstance(item.get("text"), str):
                texts.append(item["text"])
            else:
                raise ValueError(f"documents[{i}] must be a string or an object {{\"text\": string}}")
        return texts


class RerankDocument(BaseModel):
    text: str


class RerankResult(BaseModel):
    index: int = Field(..., description="position of the document in the request")
    relevance_score: float = Field(..., description="FP32 score (HPS: φ of FP32-upcast logits)")
    document: RerankDocument | None = None


class RerankMeta(BaseModel):
    precision: str = Field(..., description="forward-pass precision of the reranker (fp32, bf16, fp16)")
    scoring: Literal["hps", "native"]
    tie_groups: list[list[int]] = Field(..., description="groups (≥ 2) of documents with exactly equal rank keys, in rank order")
    tie_at_cutoff: bool = Field(..., description="a tie group still straddles top_n")
    rescored_ties: int = Field(..., description="documents re-scored in FP32 to settle a tie at top_n")
    truncated: list[int] = Field(..., description="documents cut to the model's max_length")


class RerankResponse(BaseModel):
    id: str
    model: str
    results: list[RerankResult]
    meta: RerankMeta


# ---------------------------------------------------------------------------------------------
# /v1/search


class SearchRequest(_Request):
    query: str
    top_n: int | None = Field(None, ge=1, description="results to return (default: routing.top_n)")
    mode: Mode | None = Field(None, description="dense, bm25 or hybrid (default: search.default_mode)")
    return_documents: bool = Field(True, description="include each result's text")
    return_candidates: bool = Field(False, description="also return every reranked candidate (id, score)")


class SearchResult(BaseModel):
    id: str
    relevance_score: float
    text: str | None = None
    title: str | None = None


class Candidate(BaseModel):
    id: str
    relevance_score: float = Field(..., description="exact float32 reranker score")
    rank_key: float = Field(..., description="the value the ranking sorts by (HPS: the FP32 logit margin)")


class SearchMeta(BaseModel):
    model_config = ConfigDict(extra="allow")

    k: int = Field(..., description="candidates reranked (the K the router chose)")
    escalated: bool
    reasons: list[str]
    stages_ms: dict[str, float]
    mode: Mode
    retrieved: int
    tie_groups: list[list[str]]
    tie_at_cutoff: bool
    tie_group_size_at_cutoff: int
    rescored_ties: int
    model: str
    precision: str
    scoring: str
    variant: str


class SearchResponse(BaseModel):
    id: str
    results: list[SearchResult]
    meta: SearchMeta
    candidates: list[Candidate] | None = None


# ---------------------------------------------------------------------------------------------
# /v1/embeddings


class EmbeddingRequest(_Request):
    input: str | list[str] = Field(..., description="a string or a list of strings")
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(None, ge=1, description="must equal the model's dimension if given")
    user: str | None = None

    @field_validator("input", mode="before")
    @classmethod
    def _strings(cls, value: Any) -> Any:
        if isinstance(value, list) and value and not all(isinstance(v, str) for v in value):
            bad = next(i for i, v in enumerate(value) if not isinstance(v, str))
            raise ValueError(f"input[{bad}] must be a string (token-id inputs are not supported)")
        return value


class EmbeddingData(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class Usage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[EmbeddingData]
    model: str
    usage: Usage


# ---------------------------------------------------------------------------------------------
# health


class HealthResponse(BaseModel):
    status: Literal["ok"]


class ReadyResponse(BaseModel):
    model_config = ConfigDict(extra="allow")

    status: Literal["ready", "degraded", "not_ready"]
    checks: dict[str, Any]


class ErrorDetail(BaseModel):
    type: str
    message: str


class ErrorResponse(BaseModel):
    error: ErrorDetail

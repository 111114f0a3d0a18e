"""Request and response schemas of the HTTP API, in one module (as vLLM's OpenAI protocol).

- ``POST /v1/rerank``: Cohere/Jina-shaped. Results are sorted by score descending; equal scores
  keep input order (lower ``index`` first) — except a tie straddling ``top_n`` that boundary
  re-scoring settled with FP32 forward scores (``meta.rescored_ties`` > 0).
- ``POST /v1/search``: retrieve, rerank with dynamic K, return the top ``top_n``.
- ``POST /v1/embeddings``: OpenAI-shaped.

Unknown request fields of these routes are ignored (clients of other rerank APIs send extras);
the dialect routes (``serve.app.dialects``) refuse them. Limits that depend on the server's
settings are checked by the ingress after the schema (400/413) and stated in the served OpenAPI
schema through ``dialects.contract.limited`` markers.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict, StrictBool, field_validator

from steadyrank.serve.app.dialects.contract import limited, non_blank

Mode = Literal["dense", "bm25", "hybrid"]


def _integral(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


# JSON Schema's integer and boolean, exactly: 3 and 3.0 are integers, "3" and true are not; 0 is not false.
Integer = Annotated[int, Strict(), BeforeValidator(_integral)]
PositiveInteger = Annotated[int, Field(ge=1), Strict(), BeforeValidator(_integral)]
Flag = StrictBool


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class JinaText(BaseModel):
    """An embedding input given as an object (Jina ``{"text": ...}``)."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(..., json_schema_extra=non_blank(maxLength="max_document_chars"))


# ---------------------------------------------------------------------------------------------
# /v1/rerank


DocumentText = Annotated[str, Field(json_schema_extra=limited(maxLength="max_document_chars"))]
Query = Annotated[str, Field(description="the query", json_schema_extra=non_blank(maxLength="max_query_chars"))]


class RerankRequest(_Request):
    model: str | None = Field(None, description="a served model name (see GET /v1/models); omitted = the served "
                                                "reranker", json_schema_extra=limited(enum="reranker_names"))
    query: Query
    documents: list[DocumentText | dict[str, Any]] = Field(
        ..., description="strings, or objects ranked on their `text` field or on `rank_fields`",
        json_schema_extra={"minItems": 1, **limited(maxItems="max_documents")})
    top_n: PositiveInteger | None = Field(None, description="results to return (default: all)")
    return_documents: Flag | None = Field(False, description="include each document (as sent) in the results")
    rank_fields: list[str] | None = Field(
        None, description="object documents: the fields ranked on, in this order (Cohere v1: the YAML of "
                          "these fields; fields a document lacks are skipped); default: `text`")
    max_chunks_per_doc: Annotated[int, Field(ge=1, le=1), Strict(), BeforeValidator(_integral)] | None = Field(
        None, description="Cohere v1: only 1 is served — each document is scored on its first chunk of the "
                          "model's max_length tokens (meta.truncated lists the cut ones)")


class RerankDocument(BaseModel):
    text: str


class RerankResult(BaseModel):
    index: int = Field(..., description="position of the document in the request")
    relevance_score: float = Field(..., description="FP32 score (HPS: φ of FP32-upcast logits)")
    document: RerankDocument | dict[str, Any] | None = Field(None, description="the document as sent "
                                                                                "(strings as {\"text\": ...})")


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
    query: Query
    top_n: PositiveInteger | None = Field(None, description="results to return (default: routing.top_n)",
                              json_schema_extra=limited(maximum="max_top_n"))
    mode: Mode | None = Field(None, description="dense, bm25 or hybrid (default: search.default_mode)")
    return_documents: Flag = Field(True, description="include each result's text")
    return_candidates: Flag = Field(False, description="also return every reranked candidate (id, score)")


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


EmbeddingText = Annotated[str, Field(json_schema_extra=non_blank(maxLength="max_document_chars"))]


class EmbeddingRequest(_Request):
    input: EmbeddingText | list[EmbeddingText | JinaText] = Field(
        ..., description="a string, a list of strings, or Jina's list of objects {\"text\": string}",
        json_schema_extra={"minItems": 1, **limited(maxItems="max_embedding_inputs")})
    model: str | None = Field(None, description="a served model name (see GET /v1/models); omitted = the served "
                                                "embedder", json_schema_extra=limited(enum="embedder_names"))
    encoding_format: Literal["float", "base64"] | None = "float"
    dimensions: Integer | None = Field(
        None, description="the model's dimension, or fewer for an embedder declared Matryoshka "
                          "(served.embedder.matryoshka: the first `dimensions` values, renormalised)",
        json_schema_extra=limited(minimum="embedder_min_dim", maximum="embedder_dim"))
    user: str | None = Field(None, description="an end-user id (OpenAI); accepted and not used, as by OpenAI's "
                                               "embeddings")

    @field_validator("input", mode="before")
    @classmethod
    def _strings(cls, value: Any) -> Any:
        if isinstance(value, list) and value and not all(isinstance(v, (str, dict)) for v in value):
            bad = next(i for i, v in enumerate(value) if not isinstance(v, (str, dict)))
            raise ValueError(f"input[{bad}] must be a string or an object {{\"text\": string}} "
                             "(token-id inputs are not supported)")
        return value

    def texts(self) -> list[str]:
        """The input as a list of strings."""
        if isinstance(self.input, str):
            return [self.input]
        return [item if isinstance(item, str) else item.text for item in self.input]


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

    status: Literal["ready", "not_ready"]
    checks: dict[str, Any]


class ErrorDetail(BaseModel):
    type: str
    message: str


class ErrorResponse(BaseModel):
    error: ErrorDetail

"""Request and response schemas of the HTTP API, in one module (as vLLM's OpenAI protocol).

- ``POST /v1/rerank``: Cohere/Jina-shaped. Results are sorted by score descending; equal scores
  keep input order (lower ``index`` first) — except a tie straddling ``top_n`` that boundary
  re-scoring settled with FP32 forward scores (``meta.rescored_ties`` > 0).
- ``POST /v1/search``: retrieve, rerank with dynamic K, return the top ``top_n``.
- ``POST /v1/embeddings``: OpenAI-shaped.

Unknown request fields of these routes are accepted and not honoured (clients of other rerank APIs
send extras), and never dropped without a word: the answer names them (``meta.ignored_fields`` on
``/v1/rerank``, the ``X-Ignored-Fields`` header on all three); the dialect routes
(``serve.server.http.dialects``) refuse them (422 naming them). Limits that depend on the server's
settings are stated in the served OpenAPI schema through ``dialects.schema_limits.limited`` markers; the
list limits among them bound the parse itself (``dialects.schema_limits.bounded``: 413 at the first item
over), the others are checked by the ingress after the schema (400/413). Response bodies forbid undeclared fields.
The components' calls and answers (the ``Searcher``'s :class:`SearchCall` → :class:`SearchOutcome`, the
``Reranker``'s :class:`RerankOutcome`, ``Variant``) live in ``serve.server.calls`` and are re-exported
here for the routes.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    ValidationInfo,
    field_validator,
)

from steadyrank.retrieval.modes import Mode
from steadyrank.retrieval.rewrite import DenoiseMode
from steadyrank.serve.server.calls import (
    CALIBRATED_SCORE,
    CalibrationMeta,
    Candidate,
    RerankOutcome,
    ResponseModel,
    SearchMeta,
    SearchOutcome,
    SearchResult,
)
from steadyrank.serve.server.http.dialects.schema_limits import limited, non_blank


def new_id() -> str:
    return str(uuid.uuid4())


def _integral(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


# JSON Schema's integer and boolean, exactly: 3 and 3.0 are integers, "3" and true are not; 0 is not false.
Integer = Annotated[int, Strict(), BeforeValidator(_integral)]
PositiveInteger = Annotated[int, Field(ge=1), Strict(), BeforeValidator(_integral)]
Flag = StrictBool


class _Request(BaseModel):
    """A native route's body: fields it does not declare are kept aside (:meth:`ignored_fields`)."""

    model_config = ConfigDict(extra="allow")

    def ignored_fields(self) -> list[str]:
        """The body's fields this route does not honour, in the order sent."""
        return list(self.model_extra or {})


#: a request's task instruction: at most ``limits.max_instruction_chars``, and none (only ``null``
#: schema-valid) for a model that takes no instruction
RerankInstruction = Annotated[str, Field(json_schema_extra=non_blank(maxLength="reranker_instruction_chars"))]
EmbeddingInstruction = Annotated[str, Field(json_schema_extra=non_blank(maxLength="embedder_instruction_chars"))]


class JinaText(BaseModel):
    """An embedding input given as an object (Jina ``{"text": ...}``)."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(..., json_schema_extra=non_blank(maxLength="max_document_chars"))


# ---------------------------------------------------------------------------------------------
# /v1/rerank


DocumentText = Annotated[str, Field(json_schema_extra=limited(maxLength="max_document_chars"))]
Query = Annotated[str, Field(description="the query", json_schema_extra=non_blank(maxLength="max_query_chars"))]


#: chunked reranking's per-request field (Cohere v1's name; an extension on the other dialects)
MaxChunksPerDoc = Annotated[int, Field(ge=1, json_schema_extra=limited(maximum="max_chunks_per_doc")), Strict(),
                            BeforeValidator(_integral)]
CHUNKS_DOC = ("chunked reranking: each document is cut into at most this many overlapping chunks of the reranker's "
              "tokens (each fits one input beside the query), every chunk is scored (HPS) and the document's score "
              "is its best chunk's (aggregate max of the FP32 rank keys); the winning chunk's character span is "
              "reported. 1 = score the first max_length tokens only (meta.truncated); omitted = "
              "chunking.default_max_chunks_per_doc (1 unless the server turns chunking on)")


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
                          "these fields; fields a document lacks are skipped); default: `text`",
        json_schema_extra=limited(maxItems="max_rank_fields"))
    max_chunks_per_doc: MaxChunksPerDoc | None = Field(None, description=CHUNKS_DOC)
    instruction: RerankInstruction | None = Field(
        None, description="the task instruction of this request, replacing the model's own: put into a causal-LM "
                          "reranker's prompt, or into an instruction-tuned bi-encoder's query prompt; a model that "
                          "takes none refuses it (400); omitted = the model's own")


class RerankDocument(ResponseModel):
    text: str


class RerankResult(ResponseModel):
    index: int = Field(..., description="position of the document in the request")
    relevance_score: float = Field(..., description="FP32 score (HPS: φ of FP32-upcast logits)")
    document: RerankDocument | dict[str, Any] | None = Field(None, description="the document as sent "
                                                                                "(strings as {\"text\": ...})")
    calibrated_score: float | None = Field(None, description=CALIBRATED_SCORE)
    omit_none: ClassVar[tuple[str, ...]] = ("document", "calibrated_score")


class ChunkFacts(BaseModel):
    """Chunked reranking: one document's winning chunk (a plain model: its schema shows every field)."""

    model_config = ConfigDict(extra="forbid")

    index: int = Field(..., description="the document (its position in the request)")
    chunk: int = Field(..., description="its winning chunk (0 = the first): the chunk whose rank key is the document's")
    start: int = Field(..., description="the winning chunk's first character in the document (0-based)")
    end: int = Field(..., description="one past the winning chunk's last character: document[start:end]")
    chunks_scored: int = Field(..., description="chunks of the document that were scored")


class RerankMeta(ResponseModel):
    precision: str = Field(..., description="forward-pass precision the reranker runs in (fp32, bf16, fp16, int8; "
                                            "precision auto reports what it resolved to)")
    scoring: Literal["hps", "native"]
    tie_groups: list[list[int]] = Field(..., description="groups (≥ 2) of documents with exactly equal rank keys, in rank order")
    tie_at_cutoff: bool = Field(..., description="a tie group still straddles top_n")
    rescored_ties: int = Field(..., description="documents re-scored in FP32 to settle a tie at top_n")
    cutoff_certified: bool | None = Field(
        None, description="certified cutoffs (model setting certify_cutoffs): the top_n set is FP32's, every document "
                          "within twice the forward's score error bound of the cutoff re-scored in FP32; null: not in force")
    rescored_near_cutoff: int = Field(0, description="certified cutoffs: documents re-scored in FP32 near top_n "
                                                     "beyond an exact tie")
    truncated: list[int] = Field(..., description="documents cut to the model's max_length")
    ignored_fields: list[str] | None = Field(None, description="request fields this route accepted and did not "
                                                               "honour (also in the X-Ignored-Fields header); "
                                                               "omitted when none")
    calibration: CalibrationMeta | None = Field(None, description="the calibration behind calibrated_score; "
                                                                  "omitted when the reranker has none")
    chunks: list[ChunkFacts] | None = Field(None, description="chunked reranking: each returned result's winning "
                                                              "chunk, in result order; omitted without chunking")
    omit_none: ClassVar[tuple[str, ...]] = ("ignored_fields", "calibration", "chunks")


class RerankResponse(ResponseModel):
    id: str
    model: str
    results: list[RerankResult]
    meta: RerankMeta

    @classmethod
    def build(cls, ranked: RerankOutcome, documents: Sequence[str | dict[str, Any]], top_n: int | None,
              return_documents: bool, ignored_fields: list[str] | None = None) -> RerankResponse:
        """From the Reranker deployment's ``rerank`` answer: the first ``top_n`` (all when None), each
        document as sent when ``return_documents`` (a string as ``{"text": ...}``); ``ignored_fields``
        named in ``meta`` when there are any."""

        def sent(document: str | dict[str, Any]) -> dict[str, Any]:
            return {"text": document} if isinstance(document, str) else document

        results = [RerankResult(index=i, relevance_score=float(ranked.scores[i]),
                                document=sent(documents[i]) if return_documents else None, **ranked.calibrated_field(i))
                   for i in ranked.served_order(top_n)]
        meta = RerankMeta(**ranked.tie_facts(top_n), **ranked.calibration_facts(),
                          ignored_fields=ignored_fields or None)
        return cls(id=new_id(), model=ranked.model, results=results, meta=meta)


# ---------------------------------------------------------------------------------------------
# /v1/search


class SearchRequest(_Request):
    query: Query
    top_n: PositiveInteger | None = Field(None, description="results to return (default: routing.top_n)",
                              json_schema_extra=limited(maximum="max_top_n"))
    mode: Mode | None = Field(None, description="dense, bm25 or hybrid (default: search.default_mode)")
    return_documents: Flag = Field(True, description="include each result's text")
    return_candidates: Flag = Field(False, description="also return every reranked candidate (id, score)")
    denoise: DenoiseMode | None = Field(None, description="query denoising: off, rules or llm (default: search.denoise; llm "
                                                          "falls back to rules where search.denoise_llm is unset); "
                                                          "meta.query shows the original and rewritten query")


class SearchResponse(ResponseModel):
    id: str
    results: list[SearchResult]
    meta: SearchMeta
    candidates: list[Candidate] | None = None
    omit_none: ClassVar[tuple[str, ...]] = ("candidates",)

    @classmethod
    def build(cls, outcome: SearchOutcome, return_candidates: bool) -> SearchResponse:
        return cls(id=new_id(), results=outcome.results, meta=outcome.meta,
                   candidates=outcome.candidates if return_candidates else None)


# ---------------------------------------------------------------------------------------------
# /v1/embeddings


EmbeddingText = Annotated[str, Field(json_schema_extra=non_blank(maxLength="max_document_chars"))]
PromptName = Annotated[str, Field(min_length=1, max_length=200,
                                   json_schema_extra=limited(enum="embedder_prompt_names"))]


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
    input_type: Literal["search_query", "search_document"] | None = Field(
        None, description="Cohere's: the inputs are queries (the model's query prompt goes before each) or documents "
                          "to index (its document prompt); omitted = the model's default prompt (none unless its "
                          "folder names a default_prompt_name)")
    prompt_name: PromptName | None = Field(
        None, description="TEI's: the model's prompt of this name (its config_sentence_transformers.json prompts) "
                          "goes before each input; an unknown name is refused (400)")
    instruction: EmbeddingInstruction | None = Field(
        None, description="instruction-tuned embedders: the task instruction put into the query prompt (the inputs "
                          "are queries); a model that takes none refuses it (400)")

    def prompt_request(self) -> dict[str, Any]:
        """The prompt this body asks for, as the Embedder's ``embed`` keywords (``role``,
        ``prompt_name``, ``instruction``)."""
        role = {"search_query": "query", "search_document": "document", None: None}[self.input_type]
        return {"role": role, "prompt_name": self.prompt_name, "instruction": self.instruction}

    @field_validator("input", mode="before")
    @classmethod
    def _strings(cls, value: Any, info: ValidationInfo) -> Any:
        """Token-id inputs named before the union's errors; a list longer than the server's limit (the
        validation context's ``max_embedding_inputs``) is left unread to that limit (413)."""
        limit = (info.context or {}).get("max_embedding_inputs")
        if not isinstance(value, list) or (limit is not None and len(value) > limit):
            return value
        if value and not all(isinstance(v, (str, dict)) for v in value):
            bad = next(i for i, v in enumerate(value) if not isinstance(v, (str, dict)))
            raise ValueError(f"input[{bad}] must be a string or an object {{\"text\": string}} "
                             "(token-id inputs are not supported)")
        return value

    def texts(self) -> list[str]:
        """The input as a list of strings."""
        if isinstance(self.input, str):
            return [self.input]
        return [item if isinstance(item, str) else item.text for item in self.input]


class EmbeddingData(ResponseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class Usage(ResponseModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingResponse(ResponseModel):
    object: Literal["list"] = "list"
    data: list[EmbeddingData]
    model: str
    usage: Usage

    @staticmethod
    def payload(vectors: np.ndarray, tokens: int, model: str,
                encoding_format: Literal["float", "base64"]) -> dict[str, Any]:
        """The response's JSON content (this model's shape): ``float``: each FP32 vector as a float64
        numpy row, its values exactly, which the JSON response class writes without a Python object
        per float (a model of 512 × 384 floats took ~70 ms to validate); ``base64``: little-endian
        float32 bytes of each vector."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if encoding_format == "base64":
            rows: list[Any] = [base64.b64encode(v.astype("<f4").tobytes()).decode() for v in vectors]
        else:
            rows = list(vectors.astype(np.float64))
        return {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": row} for i, row in enumerate(rows)],
                "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


# ---------------------------------------------------------------------------------------------
# /v1/models


class ModelCard(BaseModel):
    """One served model: OpenAI's fields plus the model facts of its deployment (``info``); an
    alias's card names its model in ``root``."""

    model_config = ConfigDict(extra="allow")

    id: str
    object: Literal["model"] = "model"
    owned_by: str = "steadyrank"
    task: Literal["embeddings", "rerank"]


class ModelList(ResponseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]

    @classmethod
    def build(cls, served: list[tuple[Literal["embeddings", "rerank"], dict[str, Any], tuple[str, ...]]]) -> ModelList:
        """The list of ``(task, model facts, aliases)``: each model's card (with its ``aliases``),
        then one card per alias (``root`` = the model's id)."""
        data = []
        for task, facts, aliases in served:
            # aliases, root and the facts are extra fields (extra="allow"), which the typed __init__ does not take
            data.append(ModelCard.model_validate(dict(id=facts["model"], task=task, **facts, aliases=list(aliases))))
            data += [ModelCard.model_validate({"id": alias, "task": task, "root": facts["model"]}) for alias in aliases]
        return cls(data=data)


# ---------------------------------------------------------------------------------------------
# health


class HealthResponse(ResponseModel):
    status: Literal["ok"]


ReadyStatus = Literal["ready", "degraded", "draining", "not_ready"]


class ReadyResponse(BaseModel):
    model_config = ConfigDict(extra="allow")

    status: ReadyStatus
    checks: dict[str, Any]


class ErrorDetail(ResponseModel):
    type: str
    message: str
    request_id: str | None = Field(None, description="the request's id (its X-Request-Id): quote it when reporting")


class ErrorResponse(ResponseModel):
    error: ErrorDetail

"""Hugging Face Text Embeddings Inference (TEI): ``POST /rerank`` and ``POST /embed``.

- rerank ``{query, texts, raw_scores?, return_text?, truncate?, truncation_direction?}`` → a bare
  array ``[{index, score, text?}]`` sorted by score descending (served order).
- embed ``{inputs: str | [str], normalize?, truncate?, truncation_direction?}`` → ``[[float]]``.

Parameters: ``return_text`` honoured; ``truncate`` omitted = the model's ``overflow`` setting
(TEI's ``--auto-truncate``), ``true`` = cut over-long inputs, ``false`` = refuse them (413, TEI's
validation error); ``truncation_direction`` only the model's configured side; ``raw_scores: true``
(raw logits) and ``normalize: false`` (unnormalised vectors) are not served — the schema allows only
the served values and the server refuses the others with 422 naming the field. ``max_chunks_per_doc``
(chunked reranking) is steadyrank's extension: each result then names its winning ``chunk``. Unknown
fields → 422.
Errors have TEI's body ``{"error": message, "error_type": type, "request_id"}``
(``serve.server.http.errors``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, field_validator

from steadyrank.serve.errors import InputTooLongError, SchemaError
from steadyrank.serve.server.calls import CALIBRATED_SCORE, RerankOutcome
from steadyrank.serve.server.http.dialects.schema_limits import limited
from steadyrank.serve.server.http.schemas import (
    CHUNKS_DOC,
    ChunkFacts,
    DocumentText,
    EmbeddingText,
    ErrorResponse,
    Flag,
    MaxChunksPerDoc,
    PromptName,
    Query,
)

Direction = Literal["right", "left", "Right", "Left"]
_DIRECTION_DOC = "only the model's configured truncation_side is served"


def _refuse_true(field: str, why: str):  # type: ignore[no-untyped-def]
    def check(cls: Any, value: bool | None) -> bool | None:
        if value:
            raise ValueError(f"true is not served ({why})")
        return value
    return field_validator(field)(classmethod(check))


def _refuse_false(field: str, why: str):  # type: ignore[no-untyped-def]
    def check(cls: Any, value: bool | None) -> bool | None:
        if value is False:
            raise ValueError(f"false is not served ({why})")
        return value
    return field_validator(field)(classmethod(check))


class TeiRerankRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: Query
    texts: list[DocumentText] = Field(..., json_schema_extra={"minItems": 1, **limited(maxItems="max_documents")})
    raw_scores: Flag | None = Field(False, description="only false: scores are φ(logit) (HPS: of the FP32 logit)",
                                    json_schema_extra={"enum": [False, None]})
    return_text: Flag | None = Field(False, description="include each text in its result")
    truncate: Flag | None = Field(None, description="true: cut over-long texts; false: refuse them (413); "
                                                    "omitted: the model's overflow setting")
    truncation_direction: Direction | None = Field(None, json_schema_extra=limited(enum="truncation_directions"),
                                                   description=_DIRECTION_DOC)

    max_chunks_per_doc: MaxChunksPerDoc | None = Field(None, description="steadyrank's extension: " + CHUNKS_DOC)

    _raw = _refuse_true("raw_scores", "raw logits are not returned; scores are φ of the FP32 logit")


class TeiEmbedRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    inputs: EmbeddingText | list[EmbeddingText] = Field(
        ..., json_schema_extra={"minItems": 1, **limited(maxItems="max_embedding_inputs")})
    normalize: Flag | None = Field(True, description="only true: vectors are L2-normalised (in FP32 under HPS)",
                                   json_schema_extra={"enum": [True, None]})
    truncate: Flag | None = Field(None, description="as in /rerank")
    truncation_direction: Direction | None = Field(None, json_schema_extra=limited(enum="truncation_directions"),
                                                   description=_DIRECTION_DOC)
    prompt_name: PromptName | None = Field(None, description="the model's prompt of this name (its "
                                                             "config_sentence_transformers.json prompts) goes before "
                                                             "each input; unknown names are refused (400); omitted = "
                                                             "the model's default prompt")

    _normalize = _refuse_false("normalize", "vectors are served L2-normalised")

    def texts(self) -> list[str]:
        return [self.inputs] if isinstance(self.inputs, str) else list(self.inputs)


class TeiRank(BaseModel):
    index: int
    score: float
    text: str | None = None
    calibrated_score: float | None = Field(None, description=f"steadyrank's extension (not TEI's): {CALIBRATED_SCORE}")
    chunk: ChunkFacts | None = Field(None, description="steadyrank's extension: the winning chunk (chunked reranking)")


class TeiError(BaseModel):
    error: str
    error_type: str
    request_id: str | None = None


class RerankPathError(RootModel[TeiError | ErrorResponse]):
    """Errors of ``POST /rerank``: TEI's body for TEI requests, steadyrank's for Infinity's."""


def directions(side: str) -> list[str | None]:
    """The ``truncation_direction`` values served for a model cutting on ``side``."""
    return [side, side.capitalize()]


def check_direction(direction: str | None, side: str) -> None:
    if direction is not None and direction.lower() != side:
        raise SchemaError(f"truncation_direction: only {side!r} is served (the model's truncation_side)")


def check_untruncated(truncate: bool | None, cut: list[int], field: str, max_length: int) -> None:
    """``truncate: false`` refuses inputs longer than the model's ``max_length`` tokens (TEI's 413)."""
    if truncate is False and cut:
        raise InputTooLongError(f"{field}[{cut[0]}] is longer than the model's max_length of {max_length} tokens "
                              "(send truncate: true to cut it)")


def rerank_response(out: RerankOutcome, texts: list[str], return_text: bool | None) -> list[dict[str, Any]]:
    scores = out.scores
    ranks = []
    for i in out.served_order(None):
        item: dict[str, Any] = {"index": i, "score": float(scores[i]), **out.calibrated_field(i)}
        if return_text:
            item["text"] = texts[i]
        if (chunk := out.chunk_facts(i)) is not None:
            item["chunk"] = chunk
        ranks.append(item)
    return ranks

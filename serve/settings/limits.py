"""The ``limits`` section: request limits and deadlines of the HTTP edge (admission: the
``admission`` section, :mod:`serve.settings.admission`)."""

from __future__ import annotations

from pydantic import Field, model_validator

from steadyrank.serve.settings.base import Section


class LimitsSettings(Section):
    """Request limits; beyond them the server answers 413 (size) or 504 (time)."""

    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024, description="request body size (413 beyond)")
    max_documents: int = Field(default=1000, ge=1, description="documents per /v1/rerank request (413 beyond)")
    max_document_chars: int = Field(default=20_000, ge=1, description="characters per document (413 beyond)")
    max_query_chars: int = Field(default=4_000, ge=1, description="characters per query (413 beyond)")
    max_instruction_chars: int = Field(default=2_000, ge=1, description="characters of a request's `instruction` "
                                                                         "(413 beyond)")
    max_embedding_inputs: int = Field(default=512, ge=1, description="inputs per /v1/embeddings request (413 beyond)")
    max_top_n: int = Field(default=100, ge=1, description="largest top_n of /v1/search")
    max_rank_fields: int = Field(default=100, ge=1, description="rank_fields per /v1/rerank request (413 beyond)")
    max_body_values: int = Field(
        default=20_000, ge=1,
        description="JSON values a request body holds (each array element and object member, the body itself; an "
                    "empty array or object counts one), counted before the body is parsed (413 beyond): parsing costs "
                    "~120 bytes and ~1 µs a value however few bytes it takes. At least the largest request of strings "
                    "(max(max_documents + max_rank_fields, 2 × max_embedding_inputs) + 16)")
    request_timeout_s: float = Field(default=30.0, gt=0, description="per-request deadline (504 beyond); a client may "
                                                             "ask for less with the X-Request-Timeout header")
    retry_after_s: int = Field(default=1, ge=0, description="Retry-After seconds sent with 503 overload answers")
    body_timeout_s: float = Field(
        default=15.0, gt=0, le=3600,
        description="seconds from a scoring request's arrival within which its whole body must have arrived (408 "
                    "beyond); a body still arriving holds no in-flight slot, so slow senders cannot take the server's "
                    "capacity")

    @model_validator(mode="after")
    def _values_hold_the_largest_request(self) -> LimitsSettings:
        least = max(self.max_documents + self.max_rank_fields, 2 * self.max_embedding_inputs) + 16
        if self.max_body_values < least:
            raise ValueError(f"max_body_values ({self.max_body_values}) must be ≥ {least}, or the largest request the "
                             "count limits allow is refused")
        return self

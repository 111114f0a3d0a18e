"""The ``limits`` section: request limits, deadlines and admission of the HTTP edge."""

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
    max_in_flight: int = Field(default=64, ge=1, description="scoring requests one ingress replica works on at once; "
                                                     "beyond, 503 + Retry-After at once, before any compute")
    admission_headroom: float = Field(
        default=0.8, gt=0, le=100,
        description="work-based admission of rerank, embeddings and search: a request is refused at once (503 + "
                    "Retry-After) when its predicted wait (queued documents or texts / the model's measured rate; a "
                    "search counts routing.k_low documents) exceeds this fraction of its deadline; a large value "
                    "turns it off")
    refusals_per_s: float = Field(
        default=25.0, ge=0, description="overload 503s one ingress replica sends per second at most: a refusal beyond waits "
                                "(no CPU) for its turn, at most refusal_max_wait_s, so clients that retry at once "
                                "cannot turn refusals into the main load; 0 = answer every refusal at once")
    refusal_max_wait_s: float = Field(default=5.0, ge=0, description="longest a paced refusal waits; past it, answered at once")
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

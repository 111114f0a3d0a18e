"""The ``chunking`` section: chunked reranking of documents longer than the reranker's input.

Off by default (``default_max_chunks_per_doc: 1``): turning it on changes the scores a server
serves for every long document, so a request opts in with ``max_chunks_per_doc`` (Cohere's field;
an extension field of the same name on ``/v2/rerank``, Infinity's and TEI's ``/rerank``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from steadyrank.serve.settings.base import Section


class ChunkingSettings(Section):
    """How a document is cut into chunks of the reranker's tokens, and how their scores combine."""

    default_max_chunks_per_doc: int = Field(
        default=1, ge=1, description="chunks per document when a request does not say (1 = no chunking: a long document "
                                     "is scored on its first max_length tokens, meta.truncated); a request asks for more "
                                     "with max_chunks_per_doc")
    max_chunks_per_doc: int = Field(default=16, ge=1, description="the most chunks per document a request may ask for "
                                                                   "(413 beyond)")
    max_chunks_per_request: int = Field(
        default=2000, ge=1, description="chunks of one rerank request in all: each is one forward-pass input, so a "
                                        "request whose documents expand into more is refused (413) before any forward")
    chunk_tokens: int | None = Field(
        default=None, ge=8, description="tokens of the reranker's tokenizer per chunk; unset = all the room max_length "
                                        "leaves beside the query and the model's special or prompt tokens (never more)")
    overlap_tokens: int = Field(default=32, ge=0, description="tokens two neighbouring chunks share (less than a chunk)")
    aggregate: Literal["max"] = Field(default="max", description="a document's rank key from its chunks' FP32 rank "
                                                                 "keys: max (the best passage decides)")

    @model_validator(mode="after")
    def _overlap_below_chunk(self) -> ChunkingSettings:
        if self.chunk_tokens is not None and self.overlap_tokens >= self.chunk_tokens:
            raise ValueError(f"overlap_tokens ({self.overlap_tokens}) must be less than chunk_tokens ({self.chunk_tokens})")
        if self.default_max_chunks_per_doc > self.max_chunks_per_doc:
            raise ValueError(f"default_max_chunks_per_doc ({self.default_max_chunks_per_doc}) must be ≤ "
                             f"max_chunks_per_doc ({self.max_chunks_per_doc})")
        return self

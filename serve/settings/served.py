"""The ``served`` section: the model names the HTTP routes accept."""

from __future__ import annotations

from pydantic import Field, field_validator

from steadyrank.serve.settings.base import Section


class ServedRerankerNames(Section):
    """Names a client may send as ``model`` for the reranker, besides its own id."""

    aliases: list[str] = Field(
        default_factory=lambda: ["default", "steadyrank", "rerank-v3.5", "rerank-english-v3.0",
                                 "rerank-multilingual-v3.0", "jina-reranker-v2-base-multilingual"],
        description="accepted model names of the rerank routes (the served id is always accepted)")

    @field_validator("aliases")
    @classmethod
    def _names(cls, names: list[str]) -> list[str]:
        for i, name in enumerate(names):
            if not name or name != name.strip():
                raise ValueError(f"aliases[{i}] is empty or has surrounding whitespace")
        if len(set(names)) != len(names):
            raise ValueError("aliases must be unique")
        return names


class ServedEmbedderNames(ServedRerankerNames):
    """Names of the embedder, and whether its vectors may be shortened (OpenAI ``dimensions``)."""

    aliases: list[str] = Field(
        default_factory=lambda: ["default", "steadyrank", "text-embedding-3-small", "jina-embeddings-v3"],
        description="accepted model names of the embedding routes (the served id is always accepted)")
    matryoshka: bool = Field(
        default=False, description="the embedder was trained Matryoshka-style: a prefix of its vector is itself an "
                           "embedding, so `dimensions` < dim is served (prefix, renormalised in FP32)")


class ServedSettings(Section):
    """Model names the HTTP routes accept, per served model."""

    reranker: ServedRerankerNames = Field(default_factory=ServedRerankerNames)
    embedder: ServedEmbedderNames = Field(default_factory=ServedEmbedderNames)

"""The ``search`` section: the defaults of ``/v1/search`` and its query denoising."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator, model_validator

from steadyrank.retrieval.denoise import DEFAULT_DENOISE
from steadyrank.retrieval.hygiene import Hygiene
from steadyrank.retrieval.modes import Mode
from steadyrank.retrieval.rewrite import DenoiseMode, LlmSettings
from steadyrank.serve.settings.base import Section


class DenoiseLlmSettings(Section):
    """The chat model of ``search.denoise: llm`` (an OpenAI-compatible endpoint)."""

    base_url: str = Field(..., description="OpenAI-compatible base URL, e.g. http://vllm:8000/v1")
    model: str = Field(..., description="chat model name")
    api_key: SecretStr | None = Field(default=None, description="bearer token of the endpoint (or set it through the environment)")
    timeout_s: float = Field(default=2.0, gt=0, description="deadline of one rewrite (s); on timeout or error the `rules` "
                                                    "rewrite is used")
    cache_size: int = Field(default=4096, ge=1, description="rewrites kept (LRU) per Searcher replica")

    def rewriter_settings(self) -> LlmSettings:
        return LlmSettings(base_url=self.base_url, model=self.model, timeout_s=self.timeout_s, cache_size=self.cache_size,
                           api_key=self.api_key.get_secret_value() if self.api_key else None)


class SearchSettings(Section):
    """Defaults of ``/v1/search``."""

    denoise: DenoiseMode = Field(
        default=DEFAULT_DENOISE,
        description="query denoising before search (a request's `denoise` overrides it): off = the query as "
                    "sent; rules = Unicode NFC, whitespace, and greetings, fillers, apologies, sign-offs, emoji, "
                    "requests about the asking and personal remarks removed (English, French) without touching "
                    "names, numbers or quoted text; llm = a chat model restates the information need "
                    "(search.denoise_llm), falling back to rules. off by default: rules rewrites silently "
                    "(docs/guides/probes.md)")
    denoise_llm: DenoiseLlmSettings | None = Field(default=None, description="the chat endpoint of denoise: llm")
    default_mode: Mode = Field(default="hybrid", description="retrieval mode when a request names none")

    @field_validator("denoise", mode="before")
    @classmethod
    def _bare_off(cls, value: object) -> object:
        """YAML reads a bare ``off`` as false: take it as the mode it was written as."""
        return "off" if value is False else value

    @model_validator(mode="after")
    def _llm_has_an_endpoint(self) -> SearchSettings:
        if self.denoise == "llm" and self.denoise_llm is None:
            raise ValueError("search.denoise: llm needs search.denoise_llm (base_url, model)")
        return self
    rrf_k: float = Field(default=60.0, ge=0, description="RRF constant of hybrid fusion")
    rrf_weights: tuple[float, float] = Field(default=(1.0, 1.0), description="RRF weights of (dense, bm25)")
    dedup_threshold: float | None = Field(
        default=None, ge=-1.0, le=1.0,
        description="near-duplicate suppression (stage dedup): a candidate whose stored-vector cosine with an "
                    "earlier kept candidate is ≥ this is not reranked and is served after every kept candidate; "
                    "null = off (docs/guides/routing.md, \"Pipeline hygiene\")")
    boost_weight: float = Field(
        default=0.0, ge=0.0, allow_inf_nan=False,
        description="lexical boost (stage boost): rank key + w · query-term overlap (the share of the query's "
                    "BM25 terms found in the passage), w in rank-key units; 0 = off")

    def hygiene(self) -> Hygiene:
        """The optional pipeline stages these settings switch on (:mod:`retrieval.hygiene`)."""
        return Hygiene(self.dedup_threshold, self.boost_weight)

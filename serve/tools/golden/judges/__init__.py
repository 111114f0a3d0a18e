"""Judges: what grades a candidate on the 1–5 rubric and ranks a small batch, listwise.

A judge has three calls:

- ``check()``: fail early with :class:`JudgeUnavailableError` when the judge cannot answer;
- ``grade(query, passages)``: yields one :class:`JudgeCall` per judge call as calls complete (a
  call may grade several passages); ``answer["grades"]`` maps doc id → grade 1–5;
- ``rank(query, passages)``: one :class:`JudgeCall`; ``answer["ranking"]`` is the doc ids best first.

Two implementations: ``reranker`` (:mod:`.reranker`, any model the runtime loads, FP32 scores mapped
to grades by thresholds) and ``openai-chat`` (:mod:`.openai_chat`, an OpenAI-compatible chat
endpoint). :func:`load_judge_settings` reads the judge config file (JSON or YAML) and
:func:`make_judge` builds the judge.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

#: (doc id, passage text) as shown to a judge.
Passage = tuple[str, str]
GRADES = (1, 2, 3, 4, 5)


class JudgeError(ValueError):
    """The judge failed to give a valid answer (after retries); the message names the call."""


class JudgeUnavailableError(JudgeError):
    """The judge cannot be reached or does not serve the configured model."""


@dataclass(frozen=True)
class JudgeCall:
    """One judge call as recorded in the audit: ``kind`` is ``grade`` or ``rank``."""

    kind: str
    doc_ids: list[str]
    prompt_sha256: str
    answer: dict[str, Any]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 1

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def prompt_hash(payload: Any) -> str:
    """SHA-256 (hex) of ``payload`` as canonical JSON (a prompt string or a structured request)."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


class Judge(ABC):
    """The judge interface (see the module docstring)."""

    @abstractmethod
    def check(self) -> None:
        """Raise :class:`JudgeUnavailableError` if the judge cannot answer."""

    @abstractmethod
    def grade(self, query: str, passages: Sequence[Passage]) -> Iterator[JudgeCall]:
        """Grade every passage 1–5, yielding each judge call as it completes."""

    @abstractmethod
    def rank(self, query: str, passages: Sequence[Passage]) -> JudgeCall:
        """Rank ``passages`` best first (one listwise call)."""

    def prompts_fingerprint(self) -> dict[str, str]:
        """SHA-256 of every prompt template the judge fills (by name), for a build's resume
        fingerprint: an edited template must not mix two rubrics in one golden set."""
        return {}


class RerankerJudgeSettings(BaseModel):
    """``type: reranker``: a model the runtime loads; FP32 score s ↦ grade ``1 + #{t ∈ thresholds : s ≥ t}``.

    Choosing thresholds: score a few labelled queries with the model (``steadyrank search --rerank``
    writes the scores), and put each threshold between the typical scores of adjacent grades, or at
    the score quantiles matching the grade shares you expect; ``steadyrank golden audit --qrels``
    then reports how well the resulting grades agree with the labels.
    """

    model_config = ConfigDict(extra="forbid")

    type: Literal["reranker"] = "reranker"
    model: str = Field(default="bundled", description="model directory, or 'bundled' (all-MiniLM-L6-v2 bi-encoder)")
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    thresholds: list[float] = Field(
        default=[0.25, 0.4, 0.5, 0.6], min_length=4, max_length=4,
        description="score thresholds of grades 2, 3, 4, 5 (ascending); defaults fit the bundled MiniLM's cosine",
    )

    @field_validator("thresholds")
    @classmethod
    def _ascending(cls, value: list[float]) -> list[float]:
        if any(b < a for a, b in zip(value, value[1:], strict=False)):
            raise ValueError(f"thresholds must be ascending, got {value}")
        return value


class OpenAIChatJudgeSettings(BaseModel):
    """``type: openai-chat``: an OpenAI-compatible chat endpoint (vLLM, a hosted LLM)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["openai-chat"]
    base_url: str = Field(..., description="endpoint root, e.g. http://localhost:8001/v1")
    model: str
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the API key ('EMPTY' if unset)")
    max_concurrency: int = Field(4, ge=1, description="judge calls in flight at once")
    max_retries: int = Field(4, ge=0, description="retries of a failed or invalid answer")
    backoff_s: float = Field(
        1.0, ge=0,
        description="full-jitter backoff: the wait before retry r is uniform in [0, min(backoff_max_s, backoff_s · 2^(r−1))] "
                    "seconds, unless the server's Retry-After (429/503) names the wait",
    )
    backoff_max_s: float = Field(30.0, ge=0, description="cap of one backoff wait (s); a Retry-After is not capped by it")
    retry_budget_s: float = Field(
        300.0, gt=0,
        description="most seconds one judge call may spend on its attempts and waits: a retry whose wait would end "
                    "past it (a long Retry-After included) is not made and the call fails",
    )
    timeout_s: float = Field(60.0, gt=0, description="per-request timeout (s)")
    temperature: float = 0.0
    max_tokens: int = Field(256, ge=1)
    json_mode: bool = Field(True, description="ask for response_format json_object")
    max_passage_chars: int = Field(2000, ge=1, description="passages are cut to this many characters")
    rubric: Literal["standard", "balanced"] = Field(
        "standard",
        description="packaged rubric prompt: 'standard' (templates/grade.txt) or 'balanced' (templates/grade_balanced.txt: "
                    "five evenly spaced labels, 100/75/50/25/0 % relevant, and an instruction to give each about as "
                    "often, after OrdRankBen's ordinal labelling prompt); grade_template overrides both",
    )
    grade_template: str | None = Field(None, description="rubric prompt file (default: the packaged prompt of rubric)")
    rank_template: str | None = Field(None, description="listwise prompt file (default: the packaged templates/rank.txt)")


JudgeSettings = Annotated[RerankerJudgeSettings | OpenAIChatJudgeSettings, Field(discriminator="type")]


def load_judge_settings(path: str | Path | None) -> RerankerJudgeSettings | OpenAIChatJudgeSettings:
    """The judge config from a JSON/YAML file; ``None`` = the bundled MiniLM as ``reranker`` judge."""
    if path is None:
        return RerankerJudgeSettings()
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: judge config not found")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        return TypeAdapter(JudgeSettings).validate_python(raw)
    except (yaml.YAMLError, ValidationError) as exc:
        raise ValueError(f"{path}: invalid judge config: {exc}") from None


def make_judge(settings: RerankerJudgeSettings | OpenAIChatJudgeSettings) -> Judge:
    """The judge for ``settings`` (models and clients are loaded here)."""
    if isinstance(settings, RerankerJudgeSettings):
        from steadyrank.serve.tools.golden.judges.reranker import RerankerJudge

        return RerankerJudge(settings)
    from steadyrank.serve.tools.golden.judges.openai_chat import OpenAIChatJudge

    return OpenAIChatJudge(settings)

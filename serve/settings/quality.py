"""Settings of the online-quality side path (the ``quality`` section of the server settings)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from steadyrank.metrics import parse_measures


class CanaryRules(BaseModel):
    """Thresholds of the canary verdict (see ``serve.server.quality.canary``)."""

    model_config = ConfigDict(extra="forbid")

    metrics: list[str] = Field(
        default_factory=lambda: ["ndcg@10", "ra_nwg@10"],
        description="guarded measures: every one must pass for promote; any one can trigger rollback",
    )
    margin: float = Field(default=0.01, ge=0, description="non-inferiority margin on each guarded measure")
    min_queries: int = Field(default=20, ge=2, description="paired golden queries needed before any verdict")
    max_p95_latency_increase: float = Field(
        default=0.25, ge=0, description="promote only if the canary's p95 replay latency is at most this fraction above the primary's"
    )
    confidence: float = Field(default=0.95, gt=0, lt=1, description="bootstrap confidence level")
    resamples: int = Field(default=2000, ge=100, description="bootstrap resamples")


class ProbeSettings(BaseModel):
    """Live Δ-margin probes (docs/guides/probes.md): the shadow evaluator replays a small probe bundle
    set through each reranker variant and exports ``steadyrank_probe_margin``."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=False, description="replay probe bundles on a schedule (shadow traffic on the rerankers)")
    interval_s: float = Field(default=300.0, gt=0, description="seconds between probe rounds")
    queries: int = Field(default=8, ge=1, description="probe bundles per language (each costs 5 reranked pairs per ablation)")
    languages: list[str] = Field(default_factory=lambda: ["en", "fr"], description="bundle languages (en, fr)")
    ablations: list[str] = Field(default_factory=lambda: ["mask", "near_miss", "initials"],
                                 description="ablations replayed besides base (see `steadyrank probe names --help`)")
    seed: int = Field(default=0, description="seed of the bundles (the same set every round)")
    floor_name: float = Field(default=0.0, description="alert floor of the base Δname (rank-key units; exported as "
                                               "steadyrank_probe_margin_floor{probe=\"name\"})")
    floor_topic: float = Field(default=0.0,
                               description="alert floor of the base Δtopic (steadyrank_probe_margin_floor{probe=\"topic\"})")


class LiveJudgingSettings(BaseModel):
    """Live judged samples (docs/guides/quality.md, "Live judged samples"): sampled served rankings of
    ``/v1/search`` and ``/v1/rerank`` graded by the judge of ``golden build``, off the request path.

    Cost cap, per UTC day: ``max_calls_per_day`` judge requests (an ``openai-chat`` judge makes one
    per passage, each retry counting again; the ``reranker`` judge one batched pass per sample) and
    ``max_tokens_per_day`` prompt + completion tokens as the judge reports them. A sample is admitted
    only while today's calls, plus those reserved by queued samples, plus its own passages stay within
    the call cap and today's tokens are below the token cap; what a judged sample really cost is then
    charged, so the caps are passed by at most one sample's retries and tokens.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=False, description="judge sampled served rankings (needs `store`; runs in the "
                                                     "shadow evaluator, so quality.enabled too)")
    judge: str | None = Field(default=None, description="judge config file, the one `steadyrank golden build --judge` "
                                                         "reads (type reranker or openai-chat); unset = the bundled "
                                                         "MiniLM reranker judge")
    store: str | None = Field(default=None, description="append-only JSONL file of the judgments (audit, restart, "
                                                         "`steadyrank golden from-live`); required when enabled")
    rate_per_minute: float = Field(default=2.0, gt=0, description="sampled rankings per minute (token bucket)")
    burst: int = Field(default=1, ge=1, description="samples the rate limiter may admit at once after a quiet spell")
    depth: int = Field(default=10, ge=1, le=26, description="served results judged per sample (the top `depth`)")
    max_calls_per_day: int = Field(default=2000, ge=1, description="judge requests per UTC day (see the class docstring)")
    max_tokens_per_day: int = Field(default=2_000_000, ge=1, description="judge prompt + completion tokens per UTC day")
    queue_size: int = Field(default=16, ge=1, description="admitted samples waiting for the judge; a sample beyond "
                                                          "is dropped and counted")
    window: int = Field(default=200, ge=2, description="latest judged samples per variant behind the estimate")
    measures: list[str] = Field(default_factory=lambda: ["ndcg@10", "precision4@10", "harm@10"],
                                description="measures of the served top `depth` against its judged grades "
                                            "(metrics registry names)")
    floors: dict[str, float] = Field(default_factory=dict, description="alert floor per measure, e.g. {'ndcg@10': 0.6} "
                                                                      "(exported as steadyrank_live_judged_quality_floor)")
    confidence: float = Field(default=0.95, gt=0, lt=1, description="confidence of the percentile bootstrap interval")
    resamples: int = Field(default=2000, ge=100, description="bootstrap resamples")

    @field_validator("measures")
    @classmethod
    def _known_measures(cls, value: list[str]) -> list[str]:
        parse_measures(value)  # an unknown name or a bad cutoff is a ValueError naming it
        if not value:
            raise ValueError("give at least one measure")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> LiveJudgingSettings:
        if self.enabled and self.store is None:
            raise ValueError("live judging needs `store` (the judgments file: the audit, and the daily cost cap "
                             "survives a restart through it)")
        unknown = sorted(set(self.floors) - set(self.measures))
        if unknown:
            raise ValueError(f"floors name measures that are not in `measures`: {unknown}")
        if any(name.startswith("harm") for name in self.floors):
            raise ValueError("harm is lower-is-better: a floor cannot apply to it")
        return self
class DriftSettings(BaseModel):
    """Golden drift (docs/guides/quality.md "Golden drift"): a sample of live /v1/search queries embedded
    off the request path and compared with the golden queries in the embedder's space
    (:mod:`serve.server.quality.drift`)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=True, description="measure how far sampled live queries are from the golden set")
    sample_fraction: float = Field(default=0.1, ge=0, le=1,
                                   description="fraction of user /v1/search queries sampled for drift")
    window: int = Field(default=2000, ge=10, le=100_000,
                        description="sampled live queries kept (the latest; memory: window x embedding dim x 4 bytes)")
    max_pending: int = Field(default=256, ge=1, le=10_000,
                             description="sampled queries waiting to be embedded; a sample beyond it is dropped and "
                                         "counted (steadyrank_golden_drift_samples_total{outcome=\"dropped\"})")
    batch_size: int = Field(default=32, ge=1, le=512, description="sampled queries per shadow embedding call")
    interval_s: float = Field(default=15.0, gt=0, description="seconds between drift rounds (embed the pending "
                                                               "samples, refresh the gauges)")
    min_samples: int = Field(default=50, ge=1,
                             description="sampled live queries needed before the shares are exported")
    clusters: int = Field(default=8, ge=1, le=256, description="topics: k of the golden queries' k-means")
    spread_quantile: float = Field(default=0.95, gt=0, lt=1,
                                   description="quantile of the golden queries' nearest-other-golden distances "
                                               "that defines the golden spread")
    seed: int = Field(default=0, description="seed of the sampling and the k-means")
    proposals: int = Field(default=20, ge=1, le=1000,
                           description="most queries `golden build --from-traffic` proposes at once")

class SegmentSettings(BaseModel):
    """Per-segment canary verdicts and guards (docs/guides/quality.md "Per-segment verdicts and guards").

    A request's segment is the value of ``header`` (at most ``max_length`` characters of
    ``[A-Za-z0-9._:-]``, starting with a letter or digit; a request without it is in ``default``);
    golden queries carry theirs in the golden set (``"segment"``). At most ``max_segments`` distinct
    segments are tracked: those of the golden set first, then live ones as they arrive; the rest
    count as ``other``."""

    model_config = ConfigDict(extra="forbid")

    header: str = Field(default="X-Steadyrank-Segment", min_length=1, max_length=64,
                        description="request header naming the segment (tenant, language, tag)")
    max_length: int = Field(default=32, ge=1, le=128, description="longest segment name accepted (characters); "
                                                              "a longer one is refused with 400")
    max_segments: int = Field(default=16, ge=1, le=256,
                              description="distinct segments tracked (metrics labels, verdicts); the rest count as `other`")
    min_queries: int = Field(default=10, ge=2, description="paired golden queries of a segment needed before its verdict")
    correction: Literal["holm", "bh"] = Field(
        default="holm", description="multiple-testing control across segments: holm (family-wise error) or bh "
                                    "(Benjamini-Hochberg, false discovery rate)")
    canary_share: float = Field(default=0.0, ge=0, le=1,
                                description="fraction of each segment's user /v1/search requests served by the canary "
                                            "reranker (0: the canary ranks shadow copies only)")
    harm_guard: bool = Field(default=False, description="serve a segment with the primary reranker while the canary "
                                                        "loses on it with significance (segment verdict rollback)")
    rerank_guard: bool = Field(default=False, description="serve a segment without the reranker (first-stage order) while "
                                                          "the reranker loses to the first stage on its golden queries "
                                                          "with significance")
    refresh_s: float = Field(default=5.0, ge=0, description="seconds between the HTTP edge's refreshes of the "
                                                            "segments' routes from the shadow evaluator")

    @field_validator("header")
    @classmethod
    def _header_token(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9-]+", value):
            raise ValueError(f"header must be an HTTP header name of letters, digits and '-', got {value!r}")
        return value


class QualitySettings(BaseModel):
    """The shadow evaluator: golden replays, live mirroring, canary comparison."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=True, description="run the shadow evaluator deployment")
    golden: str | None = Field(
        default=None, description="golden set: a BEIR folder or a JSONL file {query_id, query, judgments}; every document "
                          "id it judges must be in the served index, or the server refuses to start; unset = the "
                          "embedded demo golden set on the demo index, and the evaluator off on your own index"
    )
    golden_split: str = Field(default="test", description="qrels split when `golden` is a BEIR folder")
    grade_map: dict[int, int] | None = Field(
        default=None, description="map the golden set's grades onto the 1-5 rubric, e.g. {3: 5, 2: 4, 1: 3, 0: 1}"
    )
    interval_s: float = Field(default=30.0, gt=0, description="seconds between golden replay rounds")
    sample_size: int = Field(default=2, ge=1,
                             description="golden queries replayed per round (rate limit; each replay costs one full rerank)")
    window: int = Field(default=200, ge=1, description="distinct golden queries per variant kept in the sliding window "
                                                   "(the latest evaluation of each: a repeated query refreshes its "
                                                   "entry, never adds one); also the distinct queries of the "
                                                   "canary agreement")
    top_n: int = Field(default=30, ge=1, description="results requested per replayed query")
    mirror_fraction: float = Field(
        default=1.0, ge=0, le=1, description="fraction of /v1/search requests matching a golden query that are evaluated"
    )
    canary_fraction: float = Field(
        default=0.1, ge=0, le=1, description="fraction of user /v1/search requests copied to the canary for agreement"
    )
    seed: int | None = Field(default=None, description="random seed of sampling (None = nondeterministic)")
    canary: CanaryRules = Field(default_factory=CanaryRules)
    probes: ProbeSettings = Field(default_factory=ProbeSettings)
    live_judging: LiveJudgingSettings = Field(default_factory=LiveJudgingSettings)
    drift: DriftSettings = Field(default_factory=DriftSettings)
    log_queries: bool = Field(
        default=False, description="keep the text of the live queries sampled for drift (in memory, the drift "
                          "window's), so `steadyrank golden build --from-traffic` can propose them as golden "
                          "queries; off: only their embeddings are kept"
    )
    segments: SegmentSettings = Field(default_factory=SegmentSettings)

    @field_validator("grade_map")
    @classmethod
    def _rubric_targets(cls, value: dict[int, int] | None) -> dict[int, int] | None:
        if value is not None:
            bad = {k: v for k, v in value.items() if not 1 <= v <= 5}
            if bad:
                raise ValueError(f"grade_map targets must be on the 1-5 rubric, got {bad}")
        return value

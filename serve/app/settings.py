"""Server settings: one pydantic model, read from a YAML or JSON file, validated at start.

Every section has defaults; ``Settings()`` is the embedded default (bundled MiniLM embedder, the demo
corpus indexed on first start, reranking by the embedder's FP32 HPS scores, golden evaluator on).
``deploy/settings.yaml`` documents every field. Errors name the field, e.g.
``settings deploy/settings.yaml: deployments.reranker.num_cpus: Input should be greater than or equal to 0``.

Relative paths in a settings file are resolved against the file's directory. API keys come from
``auth.api_keys``, the file ``auth.keys_file`` and/or the environment variable named by
``auth.api_keys_env`` (default ``STEADYRANK_API_KEYS``, comma-separated); the union is accepted.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_type_hints

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from steadyrank.retrieval.denoise import DEFAULT_DENOISE
from steadyrank.retrieval.layout import holds_index
from steadyrank.retrieval.modes import Mode
from steadyrank.retrieval.rewrite import DenoiseMode, LlmSettings
from steadyrank.retrieval.routing import Route, RoutingSettings
from steadyrank.retrieval.routing import load_settings as load_routing_file
from steadyrank.serve.app.tracing import EXTRA_HINT as TRACING_HINT
from steadyrank.serve.app.tracing import available as tracing_available
from steadyrank.serve.quality.settings import QualitySettings
from steadyrank.serve.runtime.hub import is_hub_id
from steadyrank.serve.runtime.settings import ModelSettings, device_gpus

ENV_CACHE = "STEADYRANK_CACHE"
_MODEL_OF = {"embedder": "embedder", "reranker": "reranker", "canary_reranker": "canary"}
ENV_SETTINGS = "STEADYRANK_SETTINGS"
DEFAULT_KEYS_ENV = "STEADYRANK_API_KEYS"


class SettingsError(ValueError):
    """Invalid settings; the message has one ``field.path: problem`` line per error."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------------------------------------
# Ray Serve deployment options


class AutoscalingSettings(_Section):
    """Ray Serve autoscaling of one deployment (replaces ``num_replicas``)."""

    min_replicas: int = Field(default=1, ge=0, description="replicas kept at all times (0 = scale to zero)")
    max_replicas: int = Field(default=4, ge=1, description="upper bound on replicas")
    target_ongoing_requests: float = Field(default=4.0, gt=0, description="ongoing requests per replica the autoscaler aims at")
    upscale_delay_s: float = Field(default=10.0, ge=0, description="load must stay high this long before scaling up")
    downscale_delay_s: float = Field(default=300.0, ge=0, description="load must stay low this long before scaling down")

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalingSettings:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas ({self.min_replicas}) must be ≤ max_replicas ({self.max_replicas})")
        return self

    def to_ray(self) -> dict[str, Any]:
        return self.model_dump()


class DeploymentSettings(_Section):
    """Replicas and resources of one deployment (Ray Serve deployment options)."""

    num_replicas: int = Field(default=1, ge=1, description="fixed replica count (ignored when autoscaling is set)")
    autoscaling: AutoscalingSettings | None = Field(default=None, description="autoscale between min and max replicas")
    num_cpus: float = Field(default=0.1, ge=0, description="logical CPUs reserved per replica (Ray scheduling)")
    num_gpus: float | None = Field(
        default=None, ge=0, description="GPUs per replica (fractions share a GPU); null = derived from the model's device "
                                "(cuda or cuda:0 → 1, cuda:N → N+1, cpu and auto → 0; 0 for the deployments without a model)")
    memory_mb: int | None = Field(default=None, ge=1, description="memory reserved per replica (Ray scheduling), MiB")
    max_ongoing_requests: int = Field(default=16, ge=1, description="requests one replica works on at once")
    max_queued_requests: int = Field(
        default=-1, ge=-1, description="requests queued per caller beyond that; more → 503 with Retry-After (-1 = no limit)"
    )
    torch_threads: int | None = Field(default=None, ge=1, description="torch intra-op threads per replica (unset = Ray's default)")

    def ray_options(self) -> dict[str, Any]:
        """Keyword arguments of ``Deployment.options``."""
        actor: dict[str, Any] = {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus or 0.0}
        if self.memory_mb is not None:
            actor["memory"] = self.memory_mb * 1024 * 1024
        options: dict[str, Any] = {
            "ray_actor_options": actor,
            "max_ongoing_requests": self.max_ongoing_requests,
            "max_queued_requests": self.max_queued_requests,
        }
        if self.autoscaling is not None:
            options["num_replicas"] = "auto"
            options["autoscaling_config"] = self.autoscaling.to_ray()
        else:
            options["num_replicas"] = self.num_replicas
        return options


class BatchedDeploymentSettings(DeploymentSettings):
    """A model deployment with dynamic batching across requests (:mod:`serve.app.deployments.batcher`)."""

    max_batch_size: int | None = Field(
        default=None, ge=1, description="requests per dynamic batch at most; null = derived from the model's batch_size "
                                "(rows per forward batch): embedder 2 × batch_size × forward_lanes (a query is one row), "
                                "rerankers batch_size / 2 (a rerank request holds many rows), at most max_ongoing_requests")
    batch_wait_timeout_s: float = Field(default=0.001, ge=0, description="longest wait for a batch to fill")
    forward_lanes: int = Field(
        default=2, ge=1, description="forward batches run at once, each on torch_threads / forward_lanes intra-op threads"
    )

    @model_validator(mode="after")
    def _ongoing_covers_batch(self) -> BatchedDeploymentSettings:
        if self.max_batch_size is not None and self.max_ongoing_requests < self.max_batch_size:
            raise ValueError(
                f"max_ongoing_requests ({self.max_ongoing_requests}) must be ≥ max_batch_size ({self.max_batch_size}), "
                "or batches never fill"
            )
        return self

    def ray_options(self) -> dict[str, Any]:
        """As :meth:`DeploymentSettings.ray_options`, plus the batch limits as the deployment's
        ``user_config`` (applied by its ``reconfigure``; changing them needs no replica restart). An unset
        ``max_batch_size`` is derived by :class:`Settings` (:meth:`derive_max_batch_size`)."""
        if self.max_batch_size is None:
            raise ValueError("max_batch_size is derived from the model's batch_size by Settings: validate the whole settings")
        return {**super().ray_options(),
                "user_config": {"max_batch_size": self.max_batch_size, "batch_wait_timeout_s": self.batch_wait_timeout_s}}


_DEPLOYMENT_DEFAULTS: dict[str, dict[str, Any]] = {
    "ingress": {"num_cpus": 0.25, "max_ongoing_requests": 256, "max_queued_requests": -1},
    "searcher": {"num_cpus": 0.1, "max_ongoing_requests": 64, "max_queued_requests": 256},
    "embedder": {"num_cpus": 0.5, "max_ongoing_requests": 64, "max_queued_requests": 256, "batch_wait_timeout_s": 0.001},
    "reranker": {"num_cpus": 1.0, "max_ongoing_requests": 16, "max_queued_requests": 64, "batch_wait_timeout_s": 0.001},
    "canary_reranker": {"num_cpus": 0.5, "max_ongoing_requests": 16, "max_queued_requests": 64,
                        "batch_wait_timeout_s": 0.001},
    "retriever": {"num_cpus": 0.25, "max_ongoing_requests": 64, "max_queued_requests": 256},
    "metrics_hub": {"num_cpus": 0.05, "max_ongoing_requests": 256, "max_queued_requests": -1},
    "evaluator": {"num_cpus": 0.05, "max_ongoing_requests": 8, "max_queued_requests": 32},
}


def derive_max_batch_size(name: str, batch_size: int, deployment: BatchedDeploymentSettings) -> int:
    """Requests per dynamic batch of a model deployment from the model's rows per forward batch: the
    embedder's requests are mostly one query (one row), so 2 × batch_size × forward_lanes requests keep
    every lane busy for two forward batches; a rerank request holds many pairs, so batch_size / 2 requests
    already fill them. Never above ``max_ongoing_requests`` (a batch cannot hold more)."""
    wanted = 2 * batch_size * deployment.forward_lanes if name == "embedder" else max(1, batch_size // 2)
    return min(wanted, deployment.max_ongoing_requests)


Layout = Literal["colocated", "split"]


class DeploymentsSettings(_Section):
    """Options per deployment. A partial section keeps that deployment's other defaults.

    ``layout``: ``colocated`` (default) runs every component in one Ray Serve replica (the
    ingress holds the Searcher, Retriever, Embedder, Reranker(s), MetricsHub and ShadowEvaluator
    as objects, :mod:`serve.app.colocated`): one process and no handle hop besides Serve's proxy.
    ``split`` makes each its own deployment, to scale or place each apart (several nodes, shards,
    autoscaling a model). In ``colocated`` the one replica reserves the sum of the components'
    ``num_cpus`` and ``num_gpus``.
    """

    layout: Layout = Field(default="colocated", description="colocated (one replica runs everything) or split "
                                                    "(one deployment per component)")
    background_niceness: int = Field(default=19, ge=0, le=19, description=(
        "nice value of every thread of a model or index replica except its compute thread, and of "
        "the Serve proxies on its machine: request handling and refusals yield the cores to forward "
        "passes (0 = off)"))
    ingress: DeploymentSettings
    searcher: DeploymentSettings
    embedder: BatchedDeploymentSettings
    reranker: BatchedDeploymentSettings
    canary_reranker: BatchedDeploymentSettings
    retriever: DeploymentSettings
    metrics_hub: DeploymentSettings
    evaluator: DeploymentSettings
    _device_gpus: dict[str, float] = PrivateAttr(default_factory=dict)  # per model deployment, set by Settings

    @model_validator(mode="before")
    @classmethod
    def _merge_defaults(cls, data: Any) -> Any:
        data = {} if data is None else data
        if not isinstance(data, dict):
            return data
        merged = {}
        for name, defaults in _DEPLOYMENT_DEFAULTS.items():
            given = data.get(name)
            merged[name] = {**defaults, **given} if isinstance(given, dict) else (defaults if given is None else given)
        merged.update({k: v for k, v in data.items() if k not in _DEPLOYMENT_DEFAULTS})  # unknown → forbidden
        return merged

    @field_validator("metrics_hub")
    @classmethod
    def _one_hub(cls, value: DeploymentSettings) -> DeploymentSettings:
        if value.num_replicas != 1 or value.autoscaling is not None:
            raise ValueError("the metrics hub runs exactly one replica (num_replicas 1, no autoscaling)")
        return value

    @model_validator(mode="after")
    def _colocated_runs_once(self) -> DeploymentsSettings:
        if self.layout == "colocated":
            for name in _DEPLOYMENT_DEFAULTS:
                d: DeploymentSettings = getattr(self, name)
                if d.num_replicas != 1 or d.autoscaling is not None:
                    raise ValueError(f"{name}: more than one replica (num_replicas, autoscaling) needs layout: split "
                                     "(`steadyrank serve --replicas N` switches to it); layout colocated runs exactly "
                                     "one replica holding every component")
        return self

    def colocated_options(self, canary: bool, evaluator: bool) -> dict[str, Any]:
        """``Deployment.options`` of the one replica of the colocated layout: the ingress' options,
        reserving the CPUs and GPUs of every component it holds."""
        options = self.ingress.ray_options()
        parts = self.running(canary, evaluator)
        options["ray_actor_options"]["num_cpus"] = round(sum(d.num_cpus for d in parts), 6)
        options["ray_actor_options"]["num_gpus"] = self.replica_gpus("ingress", canary, evaluator)
        memory = [d.memory_mb for d in parts if d.memory_mb is not None]
        if memory:
            options["ray_actor_options"]["memory"] = sum(memory) * 1024 * 1024
        return options

    def replica_gpus(self, name: str, canary: bool, evaluator: bool) -> float:
        """GPUs one replica of deployment ``name`` reserves. Colocated (any name): the one replica's, the
        sum of the components' set ``num_gpus``, at least what the models' devices need (a model on
        ``cuda:N`` needs N+1 GPUs visible; the models share them). Split: the deployment's ``num_gpus``."""
        if self.layout == "split":
            return float(getattr(self, name).num_gpus or 0.0)
        parts = self.running(canary, evaluator)
        return round(max(sum(d.num_gpus or 0.0 for d in parts), max(self._device_gpus.values(), default=0.0)), 6)

    def running(self, canary: bool, evaluator: bool) -> list[DeploymentSettings]:
        """The sections of the components that run: all but the canary reranker without a canary
        and the evaluator with the shadow evaluator off."""
        off = {"canary_reranker": not canary, "evaluator": not evaluator}
        return [getattr(self, name) for name in _DEPLOYMENT_DEFAULTS if not off.get(name, False)]

    def total_cpus(self, canary: bool, evaluator: bool) -> float:
        """Logical CPUs the application reserves at its minimum replica counts."""
        total = 0.0
        for d in self.running(canary, evaluator):
            replicas = d.autoscaling.min_replicas if d.autoscaling else d.num_replicas
            total += d.num_cpus * max(replicas, 1)
        return total


# ---------------------------------------------------------------------------------------------
# Index, routing, search, limits, auth, telemetry


class IndexSettings(_Section):
    """The FAISS + BM25 index the Retriever serves (``retrieval.store``)."""

    path: str | None = Field(
        default=None, description="index directory; unset = a cache directory derived from corpus and embedder"
    )
    corpus: str | None = Field(
        default=None, description="corpus to index when `path` holds no index yet (BEIR corpus.jsonl, a BEIR folder "
                          "or JSONL); unset with `path` unset = the embedded demo corpus"
    )
    factory: str = Field(default="Flat", description="FAISS index_factory string for a new index: Flat, 'HNSW32,Flat', 'IVF1024,SQ8'…")
    ef_construction: int = Field(default=200, ge=1, description="HNSW build breadth (new index)")
    ef_search: int = Field(default=128, ge=1, description="HNSW search breadth (new index)")
    nprobe: int = Field(default=16, ge=1, description="IVF lists probed per query (new index)")
    bm25: bool = Field(default=True, description="build a BM25 index too (needed by bm25 and hybrid modes)")
    shards: int = Field(default=1, ge=1, description="shard indexes (one Retriever deployment each; 1 = unsharded)")
    shard_timeout_s: float = Field(default=5.0, gt=0, description="deadline of each shard's answer to one search")
    partial_results: bool = Field(default=False, description="a shard missing its deadline: false = the search fails "
                                                     "(503), true = the other shards' results with meta.partial")
    shard_resource: str | None = Field(
        default=None, description="custom Ray resource prefix placing shard i's replicas on nodes offering "
                          "`<prefix><i>` (e.g. shard_ → shard_0, shard_1); null = place anywhere"
    )


Signal = Literal["margin", "entropy", "overlap", "boundary", "tail_mass", "first_stage_gap", "model"]
#: A signal of ``routing.disable`` → the threshold it nulls.
_THRESHOLD_OF: dict[str, str] = {"margin": "margin_below", "entropy": "entropy_above", "overlap": "overlap_below",
                                 "boundary": "boundary_below", "tail_mass": "tail_mass_above",
                                 "first_stage_gap": "first_stage_gap_below", "model": "model_above"}


class _RoutingSectionBase(_Section):
    """Dynamic-K routing (``retrieval.routing``): every field of its ``RoutingSettings``, each null
    (unset) by default. An unset field comes from ``file``, else the built-in default; a signal is
    switched off with ``disable`` (a null threshold means "unset")."""

    route: Route = Field(default="dynamic", description="dynamic (escalate on uncertainty), fixed50 (k_low), fixed100 (k_high)")
    file: str | None = Field(default=None, description="routing settings JSON written by `steadyrank route calibrate`")
    disable: list[Signal] = Field(
        default_factory=list, description="signals to switch off (their thresholds become null)"
    )

    @model_validator(mode="after")
    def _valid_policy(self) -> _RoutingSectionBase:
        if self.file is not None and not Path(self.file).expanduser().is_file():
            raise ValueError(f"file: no such file: {self.file}")
        self.policy()  # a ValueError here names the bad routing values
        return self

    def policy(self) -> RoutingSettings:
        """The routing policy: file (or defaults), then the fields set here, then ``disable``."""
        base = load_routing_file(Path(self.file).expanduser()) if self.file else RoutingSettings()
        values = base.to_json()
        values.update({k: getattr(self, k) for k in values if getattr(self, k) is not None})
        for signal in self.disable:
            values[_THRESHOLD_OF[signal]] = None
        return RoutingSettings(**values)


def _default_text(value: Any) -> str:
    """A routing default as a description says it: ``50``, ``true``, ``off`` (None), ``none`` (empty)."""
    if value is None:
        return "off"
    return "none" if value == () else json.dumps(value)


def _routing_section() -> type[_RoutingSectionBase]:
    """The settings' routing section: :class:`_RoutingSectionBase` plus one optional field per
    ``RoutingSettings`` field, typed and described from it (``metadata["description"]``)."""
    hints = get_type_hints(RoutingSettings)
    fields: dict[str, Any] = {
        f.name: (hints[f.name] | None, Field(default=None, description=f"{f.metadata['description']} "
                                                                       f"(default {_default_text(f.default)})"))
        for f in dataclass_fields(RoutingSettings)}
    return create_model("RoutingSection", __base__=_RoutingSectionBase, __module__=__name__,
                        __doc__=_RoutingSectionBase.__doc__, **fields)


if TYPE_CHECKING:
    RoutingSection = _RoutingSectionBase
else:
    RoutingSection = _routing_section()


class DenoiseLlmSettings(_Section):
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


class SearchSettings(_Section):
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


class LimitsSettings(_Section):
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


class AuthSettings(_Section):
    """Bearer API keys for the scoring routes (/v1/*), from ``api_keys``, the file ``keys_file`` and the
    variable ``api_keys_env`` (the union is accepted). No key anywhere = open, which the application
    allows on a loopback address only, unless ``allow_anonymous`` is true (:mod:`serve.app.exposure`)."""

    api_keys: list[SecretStr] = Field(default_factory=list, description="accepted keys")
    api_keys_env: str = Field(default=DEFAULT_KEYS_ENV, description="environment variable with more keys, comma-separated "
                                                            "(e.g. from a Kubernetes Secret through secretKeyRef)")
    keys_file: str | None = Field(
        default=None, description="file with more keys, one per line or comma-separated ('#' starts a comment), read at "
                          "start (e.g. a Kubernetes Secret mounted as a file); relative to the settings file; a file "
                          "without a key is an error")
    allow_anonymous: bool = Field(
        default=False, description="serve with no key on a non-loopback address (every route open to the network); "
                           "without it the application refuses such a bind (`steadyrank serve`, `serve run`, "
                           "`serve deploy`, KubeRay)")
    protect_metrics: bool = Field(default=False, description="also require a key on GET /metrics")
    admin_keys: list[SecretStr] = Field(
        default_factory=list,
        description="admin keys: accepted wherever api_keys are, and the only keys whose X-Golden-Query-Id header is "
                    "honoured for a query that is not that golden query's own text")
    admin_keys_env: str = Field(default="STEADYRANK_ADMIN_KEYS", description="environment variable with more admin keys, "
                                                                     "comma-separated")

    @field_validator("api_keys", "admin_keys")
    @classmethod
    def _clean(cls, keys: list[SecretStr]) -> list[SecretStr]:
        for i, key in enumerate(keys):
            value = key.get_secret_value()
            if not value or value != value.strip() or any(c.isspace() for c in value):
                raise ValueError(f"api_keys[{i}] is empty or contains whitespace")
        return keys

    def file_keys(self) -> list[str]:
        """The keys of ``keys_file`` (none when unset); a missing or unreadable file is a SettingsError."""
        if self.keys_file is None:
            return []
        try:
            text = Path(self.keys_file).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SettingsError(f"settings: auth.keys_file: cannot read {self.keys_file}: {exc}") from None
        lines = (line.split("#", 1)[0] for line in text.splitlines())
        keys = [key.strip() for line in lines for key in line.split(",") if key.strip()]
        if not keys:  # an empty Secret must not turn into "no key at all", i.e. every route open
            raise SettingsError(f"settings: auth.keys_file: {self.keys_file} holds no key (it is empty or holds only "
                                "comments): put one key a line in it, or unset auth.keys_file")
        return keys

    def resolved_keys(self, environ: dict[str, str] | None = None) -> list[str]:
        """Keys from the settings, the keys file and the environment (deduplicated, order kept)."""
        return _keys(self.api_keys, self.api_keys_env, environ, self.file_keys())

    def resolved_admin_keys(self, environ: dict[str, str] | None = None) -> list[str]:
        """Admin keys from the settings and the environment (deduplicated, order kept)."""
        return _keys(self.admin_keys, self.admin_keys_env, environ)

    def check_bind(self, host: str, environ: dict[str, str] | None = None, origin: str = "http.host, --host") -> int:
        """The number of active keys; a SettingsError when there are none, ``host`` (taken from
        ``origin``, named in the error) is not a loopback address and ``allow_anonymous`` is off."""
        count = len(self.resolved_keys(environ))
        if count == 0 and not self.allow_anonymous and not is_loopback(host):
            raise SettingsError(
                f"settings: auth: no API key is configured and the server would listen on {host!r} ({origin}), open "
                f"to the network: give keys (--api-key-file FILE, auth.keys_file, auth.api_keys or "
                f"${self.api_keys_env}), bind 127.0.0.1, or set auth.allow_anonymous: true")
        return count


def _keys(listed: list[SecretStr], env_name: str, environ: dict[str, str] | None,
          more: list[str] | None = None) -> list[str]:
    """``listed`` keys, then ``more`` (a keys file), then the comma-separated ones of ``$env_name``
    (deduplicated, order kept)."""
    env = os.environ if environ is None else environ
    keys = [k.get_secret_value() for k in listed] + (more or [])
    keys += [k.strip() for k in env.get(env_name, "").split(",") if k.strip()]
    return list(dict.fromkeys(keys))


def is_loopback(host: str) -> bool:
    """``host`` is a loopback address (127.0.0.0/8, ::1) or ``localhost``."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class TelemetrySettings(_Section):
    flush_interval_s: float = Field(default=0.5, gt=0, le=60, description="how often each replica sends its metrics to the hub")


class HttpSettings(_Section):
    """Where `steadyrank serve` listens (serve_config.yaml's http_options take over under `serve run/deploy`)."""

    host: str = Field(default="127.0.0.1", description="bind address (0.0.0.0 = every interface)")
    port: int = Field(default=8000, ge=1, le=65535)


class ServerSettings(_Section):
    """Lifecycle of `steadyrank serve`: shutdown grace, Ray's dashboard and Serve's access log."""

    shutdown_grace_s: float = Field(
        default=30.0, ge=0, le=3600,
        description="on SIGTERM/SIGINT: seconds the whole stop may take; in-flight requests get all but the last "
                    "10 s (the teardown's) to finish before Ray is shut down",
    )
    dashboard: bool = Field(default=False, description="start Ray's dashboard (and its agent processes) with the local Ray")
    ingress: Literal["haproxy", "proxy"] = Field(
        default="haproxy", description="HTTP front of a local Ray head: haproxy (Ray Serve's HAProxy ingress: HAProxy routes "
                               "each request to the Ingress replica's own HTTP server) or proxy (Ray Serve's Python "
                               "proxy, one more hop); with --address the cluster's Ray settings decide")
    access_log: bool = Field(default=False, description="Ray Serve's per-request access log lines (proxy and every replica) "
                                                "in Ray's log folder; steadyrank's metrics count every request either way")
    log_format: Literal["text", "json"] = Field(
        default="text", description="steadyrank's log lines: text, or one JSON object per line (ts, level, logger, message, "
                            "request_id); every line about a request carries its request id")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] | None = Field(
        default=None, description="level of Ray's and Ray Serve's own log lines (unset: WARNING, a quiet start); "
                          "steadyrank's own lines are at INFO or this level when set")
    tracing: bool = Field(
        default=False, description="OpenTelemetry spans of every request (ingress, model and retriever calls), continuing "
                           "the trace of a W3C traceparent header; exported over OTLP/HTTP (OTEL_EXPORTER_OTLP_*) unless "
                           "the process has a tracer provider; needs the otel extra")

    @field_validator("tracing")
    @classmethod
    def _otel_installed(cls, value: bool) -> bool:
        if value and not tracing_available():
            raise ValueError(f"needs OpenTelemetry; {TRACING_HINT}")
        return value


class ServedRerankerNames(_Section):
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


class ServedSettings(_Section):
    """Model names the HTTP routes accept, per served model."""

    reranker: ServedRerankerNames = Field(default_factory=ServedRerankerNames)
    embedder: ServedEmbedderNames = Field(default_factory=ServedEmbedderNames)


class Settings(_Section):
    """Everything the server reads at start."""

    cache_dir: str | None = Field(default=None, description=f"index cache; unset = ${ENV_CACHE} or ~/.cache/steadyrank")
    embedder: ModelSettings = Field(default_factory=ModelSettings, description="bi-encoder for queries and the index")
    reranker: ModelSettings | None = Field(
        default=None, description="primary reranker; unset = the embedder's FP32 (HPS) cosine scores"
    )
    canary: ModelSettings | None = Field(default=None, description="canary reranker (shadow copies only)")
    index: IndexSettings = Field(default_factory=IndexSettings)
    routing: RoutingSection = Field(default_factory=RoutingSection)
    search: SearchSettings = Field(default_factory=SearchSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    # validated from {}: the before-validator fills each deployment in from its defaults
    deployments: DeploymentsSettings = Field(default_factory=lambda: DeploymentsSettings.model_validate({}))
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    quality: QualitySettings = Field(default_factory=QualitySettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    served: ServedSettings = Field(default_factory=ServedSettings)

    @model_validator(mode="after")
    def _gpus_follow_devices(self) -> Settings:
        """An unset ``num_gpus`` of a model deployment is derived from the model's device; a set one must
        let the replica see the GPU its device names (Ray hides every GPU a replica has not reserved)."""
        d = self.deployments
        for name, model, deployment in self.model_deployments():
            need = float(device_gpus(model.device))
            d._device_gpus[name] = need
            gpus = deployment.num_gpus
            if d.layout == "split" and gpus is None:
                gpus = deployment.num_gpus = need
            if d.layout == "split" and need > 0 and gpus is not None and math.ceil(gpus) < need:
                raise ValueError(
                    f"{_MODEL_OF[name]}.device is {model.device}, but deployments.{name}.num_gpus is "
                    f"{gpus:g}: Ray shows the replica {math.ceil(gpus)} GPU(s); set "
                    f"num_gpus to {need:g} (or leave it unset: it is derived from the device), or device: cpu")
        if d.layout == "colocated":
            have = d.replica_gpus("ingress", self.canary is not None, self.quality.enabled)
            for name, model, _ in self.model_deployments():
                if math.ceil(have) < d._device_gpus[name]:
                    raise ValueError(
                        f"{_MODEL_OF[name]}.device is {model.device}, but the colocated replica reserves {have:g} "
                        f"GPU(s) (the sum of deployments.*.num_gpus): leave num_gpus unset (derived from the "
                        f"device), or device: cpu")
        return self

    @model_validator(mode="after")
    def _batches_follow_models(self) -> Settings:
        """Derive every unset ``max_batch_size`` (requests per dynamic batch) from the model's
        ``batch_size`` (rows per forward batch): the documented pair is the model's ``batch_size`` and
        ``batch_tokens``."""
        for name, model, deployment in self.model_deployments():
            if isinstance(deployment, BatchedDeploymentSettings) and deployment.max_batch_size is None:
                deployment.max_batch_size = derive_max_batch_size(name, model.batch_size, deployment)
        if self.canary is None and self.deployments.canary_reranker.max_batch_size is None:
            d = self.deployments.canary_reranker
            d.max_batch_size = derive_max_batch_size("canary_reranker", self.reranker_model.batch_size, d)
        return self

    def model_deployments(self) -> list[tuple[str, ModelSettings, DeploymentSettings]]:
        """``(deployment name, model settings, deployment settings)`` of every model deployment that runs."""
        d = self.deployments
        pairs: list[tuple[str, ModelSettings, DeploymentSettings]] = [
            ("embedder", self.embedder, d.embedder), ("reranker", self.reranker_model, d.reranker)]
        if self.canary is not None:
            pairs.append(("canary_reranker", self.canary, d.canary_reranker))
        return pairs

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        policy = self.routing.policy()
        ingress = self.deployments.ingress.max_ongoing_requests
        if self.deployments.layout == "colocated" and self.index.shards > 1:
            raise ValueError(f"index.shards ({self.index.shards}) needs deployments.layout: split "
                             "(each shard is a Retriever deployment of its own)")
        if self.limits.max_in_flight >= ingress:
            raise ValueError(
                f"limits.max_in_flight ({self.limits.max_in_flight}) must be < deployments.ingress.max_ongoing_requests "
                f"({ingress}), so steadyrank refuses overload with its JSON 503 before Ray's own queue limit does"
            )
        if self.quality.enabled and self.quality.top_n > self.limits.max_top_n:
            raise ValueError(
                f"quality.top_n ({self.quality.top_n}) must be ≤ limits.max_top_n ({self.limits.max_top_n})"
            )
        if self.limits.max_top_n > policy.k_high:
            raise ValueError(
                f"limits.max_top_n ({self.limits.max_top_n}) must be ≤ routing k_high ({policy.k_high}): "
                "results come from the reranked candidates"
            )
        return self

    # -- derived ------------------------------------------------------------------------------

    @property
    def reranker_model(self) -> ModelSettings:
        """The primary reranker's model settings (the embedder's when unset)."""
        return self.reranker if self.reranker is not None else self.embedder

    def cache_path(self) -> Path:
        if self.cache_dir:
            return Path(self.cache_dir).expanduser()
        env = os.environ.get(ENV_CACHE)
        return Path(env).expanduser() if env else Path.home() / ".cache" / "steadyrank"

    def routing_policy(self) -> RoutingSettings:
        return self.routing.policy()


# ---------------------------------------------------------------------------------------------
# Loading

_MODEL_SECTIONS = ("embedder", "reranker", "canary")
_PATH_FIELDS = (
    ("cache_dir",), ("embedder", "path"), ("reranker", "path"), ("canary", "path"),
    ("index", "path"), ("index", "corpus"), ("routing", "file"), ("quality", "golden"), ("auth", "keys_file"),
)


def _resolve_paths(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """Make the path fields of raw settings absolute relative to ``base`` (the settings file's folder).
    A model ``path`` that is no folder under ``base`` but has a Hub id's shape (``org/name``) stays
    as it is: it is resolved on the Hub (:mod:`serve.app.models`)."""
    for keys in _PATH_FIELDS:
        node: Any = data
        for key in keys[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get(keys[-1]), str):
            value = Path(node[keys[-1]]).expanduser()
            hub_id = keys[-1] == "path" and keys[0] in _MODEL_SECTIONS and is_hub_id(node[keys[-1]])
            if not value.is_absolute() and str(value) != "" and not (hub_id and not (base / value).is_dir()):
                node[keys[-1]] = str((base / value).resolve())
    return data


def format_validation_error(exc: ValidationError, source: str) -> str:
    lines = []
    for error in exc.errors():
        loc = ".".join(str(p) for p in error["loc"]) or "(top level)"
        message = error["msg"].removeprefix("Value error, ")
        lines.append(f"settings {source}: {loc}: {message}")
    return "\n".join(lines)


def read_settings_file(path: str | Path) -> dict[str, Any]:
    """The raw mapping of a YAML/JSON settings file, paths resolved against its folder."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise SettingsError(f"settings {file}: no such file")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise SettingsError(f"settings {file}: not valid YAML/JSON: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SettingsError(f"settings {file}: expected a mapping at the top level, got {type(data).__name__}")
    data = data.get("steadyrank", data) if set(data) == {"steadyrank"} else data
    return _resolve_paths(data, file.resolve().parent)


def load_settings(source: str | Path | dict[str, Any] | Settings | None = None) -> Settings:
    """Settings from a file path, a mapping, a :class:`Settings`, or None (``$STEADYRANK_SETTINGS`` if
    set, else the embedded default). Raises :class:`SettingsError` naming every bad field."""
    if isinstance(source, Settings):
        return source
    if source is None and os.environ.get(ENV_SETTINGS):
        source = os.environ[ENV_SETTINGS]
    if source is None:
        data, label = {}, "(embedded default)"
    elif isinstance(source, dict):
        data, label = _resolve_paths(dict(source), Path.cwd()), "(mapping)"
    else:
        data, label = read_settings_file(source), str(source)
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise SettingsError(format_validation_error(exc, label)) from None


def check_files(settings: Settings) -> None:
    """Check that every file the settings name exists (errors name the field); cheap, no model loads."""
    problems = []
    for field, model in (("embedder", settings.embedder), ("reranker", settings.reranker), ("canary", settings.canary)):
        if model is not None and model.path is not None and not Path(model.path).expanduser().is_dir():
            problems.append(f"{field}.path: no model directory at {model.path}")
    index = settings.index
    if index.corpus is not None and not Path(index.corpus).expanduser().exists():
        problems.append(f"index.corpus: no such file or folder: {index.corpus}")
    if index.path is not None and index.corpus is None and not holds_index(Path(index.path).expanduser()):
        problems.append(
            f"index.path: no index at {index.path} (build one with `steadyrank index build`, "
            "or set index.corpus to build it on first start)"
        )
    quality = settings.quality
    if quality.enabled and quality.golden is not None and not Path(quality.golden).expanduser().exists():
        problems.append(f"quality.golden: no such file or folder: {quality.golden}")
    if problems:
        raise SettingsError("\n".join(f"settings: {p}" for p in problems))

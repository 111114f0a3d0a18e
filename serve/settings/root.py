"""The whole settings tree: :class:`Settings`, one field per section, and the checks across sections
(GPUs against devices, batch sizes from the models, limits against routing and deployments)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from steadyrank.retrieval.routing import RoutingSettings
from steadyrank.serve.runtime.settings import ModelSettings, device_gpus
from steadyrank.serve.settings.admission import AdmissionSettings, move_legacy_keys
from steadyrank.serve.settings.auth import AuthSettings
from steadyrank.serve.settings.base import Section
from steadyrank.serve.settings.chunking import ChunkingSettings
from steadyrank.serve.settings.deployments import (
    BatchedDeploymentSettings,
    DeploymentSettings,
    DeploymentsSettings,
    derive_max_batch_size,
)
from steadyrank.serve.settings.http import HttpSettings
from steadyrank.serve.settings.index import IndexSettings
from steadyrank.serve.settings.limits import LimitsSettings
from steadyrank.serve.settings.quality import QualitySettings
from steadyrank.serve.settings.routing import RoutingSection
from steadyrank.serve.settings.search import SearchSettings
from steadyrank.serve.settings.served import ServedSettings
from steadyrank.serve.settings.server import ServerSettings
from steadyrank.serve.settings.telemetry import TelemetrySettings

ENV_CACHE = "STEADYRANK_CACHE"
_MODEL_OF = {"embedder": "embedder", "reranker": "reranker", "canary_reranker": "canary"}


class Settings(Section):
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
    admission: AdmissionSettings = Field(default_factory=AdmissionSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    # validated from {}: the before-validator fills each deployment in from its defaults
    deployments: DeploymentsSettings = Field(default_factory=lambda: DeploymentsSettings.model_validate({}))
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    quality: QualitySettings = Field(default_factory=QualitySettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    served: ServedSettings = Field(default_factory=ServedSettings)
    chunking: ChunkingSettings = Field(default_factory=ChunkingSettings)

    @model_validator(mode="before")
    @classmethod
    def _legacy_admission_keys(cls, data: Any) -> Any:
        """The admission keys of ``limits`` and ``quality`` moved into ``admission``, with a warning
        (:func:`~serve.settings.admission.move_legacy_keys`)."""
        return move_legacy_keys(data)

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
        if self.admission.max_in_flight >= ingress:
            raise ValueError(
                f"admission.max_in_flight ({self.admission.max_in_flight}) must be < deployments.ingress.max_ongoing_requests "
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

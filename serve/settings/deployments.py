"""The ``deployments`` section: each component's Ray Serve deployment options (replicas, resources,
queues, dynamic batching) and the layout (colocated or split) the hosting layer
(:mod:`serve.server.hosting`) builds."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from steadyrank.serve.settings.base import Section


class AutoscalingSettings(Section):
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


class DeploymentSettings(Section):
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
    """A model deployment with dynamic batching across requests (:mod:`serve.server.components.batcher`)."""

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


class DeploymentsSettings(Section):
    """Options per deployment. A partial section keeps that deployment's other defaults.

    ``layout``: ``colocated`` (default) runs every component in one Ray Serve replica (the
    ingress holds the Searcher, Retriever, Embedder, Reranker(s), MetricsHub and ShadowEvaluator
    as objects, :mod:`serve.server.hosting.colocated`): one process and no handle hop besides Serve's proxy.
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

"""The application's one composition root: which components it has and what each is built from.

:func:`components` lists them in dependency order (each after those its arguments name), each as
its deployment class, its ``settings.deployments`` section and its constructor arguments, where
:class:`Ref` names another component and :data:`HUB` the metrics sink. Both layouts build from
this one list:

- ``split`` (:func:`serve.server.hosting.builder.build_app`): every component a Ray Serve deployment, bound
  with its section's options; a ``Ref`` becomes the bound deployment (a ``DeploymentHandle`` in the
  replica), ``HUB`` the MetricsHub's;
- ``colocated`` (:func:`serve.server.hosting.colocated.colocate`): every component a plain object in the
  Ingress replica; a ``Ref`` becomes a :class:`~serve.server.hosting.colocated.LocalHandle` to it, ``HUB`` the
  in-process metrics store.

The Ingress (the HTTP front) takes the components named by :data:`INGRESS_ARGS`. With
``index.shards > 1`` (split layout only) the Retriever is the scatter-gather front over one
deployment per shard (:mod:`serve.server.hosting.shards`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from steadyrank.serve.settings import Settings


@dataclass(frozen=True)
class Ref:
    """Another component, by its key."""

    key: str


#: The metrics sink a component records into: the MetricsHub deployment (split) or its store (colocated).
HUB = Ref("metrics_hub")

#: The components the Ingress takes, in the order of its constructor's arguments after ``settings``.
INGRESS_ARGS = ("searcher", "embedder", "reranker", "retriever", "metrics_hub", "evaluator")


@dataclass(frozen=True)
class Component:
    """One component: ``key`` (its ``settings.deployments`` section and how others refer to it),
    ``deployment`` (the ``@serve.deployment`` class), ``args`` (its constructor's, with
    :class:`Ref`s), ``options`` (extra Ray Serve options: a deployment name, a shard's placement)."""

    key: str
    deployment: Any
    args: tuple[Any, ...]
    options: dict[str, Any] | None = None
    section: str | None = None  # the settings.deployments section when it is not ``key``

    def ray_options(self, settings: Settings) -> dict[str, Any]:
        """The deployment's Ray Serve options: its section's, then ``options`` over them."""
        return {**getattr(settings.deployments, self.section or self.key).ray_options(), **(self.options or {})}

    def resolved(self, resolve: Callable[[Ref], Any]) -> tuple[Any, ...]:
        """``args`` with every :class:`Ref` replaced by ``resolve(ref)``."""
        return tuple(resolve(a) if isinstance(a, Ref) else a for a in self.args)


def components(settings: Settings) -> list[Component]:
    """The application's components, in dependency order (see the module docstring)."""
    from steadyrank.serve.server.components.embedder import Embedder
    from steadyrank.serve.server.components.metrics_hub import MetricsHub
    from steadyrank.serve.server.components.reranker import Reranker
    from steadyrank.serve.server.components.retriever import Retriever
    from steadyrank.serve.server.components.searcher import Searcher

    canary = settings.canary is not None
    graph = [
        Component("metrics_hub", MetricsHub, ()),
        Component("embedder", Embedder, (settings, HUB)),
        Component("reranker", Reranker, (settings, settings.reranker_model, "primary", HUB), {"name": "Reranker"}),
    ]
    if canary:
        graph.append(Component("canary_reranker", Reranker, (settings, settings.canary, "canary", HUB),
                               {"name": "CanaryReranker"}))
    if settings.index.shards > 1:
        from steadyrank.serve.server.hosting.shards import RetrieverShard, ShardedRetriever, shard_options

        shards = [Component(f"retriever_shard_{i}", RetrieverShard, (settings, i), shard_options(settings, i),
                            section="retriever") for i in range(settings.index.shards)]
        graph += [*shards, Component("retriever", ShardedRetriever, (settings, HUB, *(Ref(s.key) for s in shards)))]
    else:
        graph.append(Component("retriever", Retriever, (settings,)))
    graph.append(Component("searcher", Searcher, (settings, Ref("embedder"), Ref("retriever"), Ref("reranker"),
                                                  Ref("canary_reranker") if canary else None, HUB)))
    if settings.quality.enabled:
        from steadyrank.serve.server.quality.evaluator import ShadowEvaluator
        from steadyrank.serve.server.quality.service import GoldenProfile

        variants = ("primary", "canary") if canary else ("primary",)
        profile = GoldenProfile(settings.search.default_mode, settings.search.denoise)
        graph.append(Component("evaluator", ShadowEvaluator, (settings.quality, Ref("searcher"), HUB, variants, profile)))
    return graph

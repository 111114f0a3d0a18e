"""The application's one composition root: which components it has and what each is built from.

:func:`components` lists them in dependency order (each after those its arguments name), each as
its class (a plain class of :mod:`serve.server.components`; Ray Serve wraps it only here, in the
hosting layer), its Ray Serve deployment defaults, its ``settings.deployments`` section and its
constructor arguments, where :class:`Ref` names another component and :data:`HUB` the metrics
sink. Both layouts build from this one list:

- ``split`` (:func:`serve.server.hosting.builder.build_app`): every component a Ray Serve deployment
  (:meth:`Component.deployment`), bound with its section's options; a ``Ref`` becomes the bound
  deployment (a ``DeploymentHandle`` in the replica), ``HUB`` the MetricsHub's;
- ``colocated`` (:func:`serve.server.hosting.colocated.colocate`): every component a plain object in the
  Ingress replica; a ``Ref`` becomes a :class:`~serve.server.hosting.colocated.LocalHandle` to it, ``HUB`` the
  in-process metrics store.

The Ingress (the HTTP front) takes the components named by :data:`INGRESS_ARGS`. With
``index.shards > 1`` (split layout only) the Retriever is the scatter-gather front over one
deployment per shard (:mod:`serve.server.hosting.shards`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from steadyrank.serve.settings import Settings


@dataclass(frozen=True)
class Ref:
    """Another component, by its key."""

    key: str


#: The metrics sink a component records into: the MetricsHub deployment (split) or its store (colocated).
HUB = Ref("metrics_hub")

#: The shadow evaluator's deployment: one low-concurrency replica off the request path; mirrored
#: events beyond its queue are dropped, never queued without bound.
EVALUATOR_DEFAULTS = {"num_replicas": 1, "max_ongoing_requests": 8, "max_queued_requests": 32,
                      "ray_actor_options": {"num_cpus": 0.05}}

def live_judge(config: str | None) -> Any:
    """The judge of ``quality.live_judging``: the ``golden build`` judge of the config file ``config``
    (None = the bundled MiniLM reranker judge), built in the evaluator's replica."""
    from steadyrank.serve.tools.golden.judges import load_judge_settings, make_judge

    return make_judge(load_judge_settings(config))


#: The components the Ingress takes, in the order of its constructor's arguments after ``settings``.
INGRESS_ARGS = ("searcher", "embedder", "reranker", "retriever", "metrics_hub", "evaluator")


@dataclass(frozen=True)
class Component:
    """One component: ``key`` (its ``settings.deployments`` section and how others refer to it),
    ``cls`` (its class), ``args`` (its constructor's, with :class:`Ref`s), ``defaults`` (its Ray
    Serve deployment's own options: its name, and what no settings section overrides), ``options``
    (Ray Serve options over the section's: a deployment name, a shard's placement)."""

    key: str
    cls: type
    args: tuple[Any, ...]
    options: dict[str, Any] | None = None
    section: str | None = None  # the settings.deployments section when it is not ``key``
    defaults: dict[str, Any] = field(default_factory=dict)

    def deployment(self) -> Any:
        """``cls`` as a Ray Serve deployment (``ray.serve.Deployment``) with its ``defaults``; its
        replicas bind their gRPC server on a loopback node's address
        (:func:`serve.server.hosting.replica_grpc.binding_on_node`)."""
        from ray import serve

        from steadyrank.serve.server.hosting.replica_grpc import binding_on_node

        return serve.deployment(binding_on_node(self.cls), **self.defaults)

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
    from steadyrank.serve.server.hosting.health import this_app_replica_states

    canary = settings.canary is not None
    reranker = {"name": "Reranker"}
    graph = [
        Component("metrics_hub", MetricsHub, (this_app_replica_states,), defaults={"name": "MetricsHub", "num_replicas": 1}),
        Component("embedder", Embedder, (settings, HUB), defaults={"name": "Embedder"}),
        Component("reranker", Reranker, (settings, settings.reranker_model, "primary", HUB), {"name": "Reranker"},
                  defaults=reranker),
    ]
    if canary:
        graph.append(Component("canary_reranker", Reranker, (settings, settings.canary, "canary", HUB),
                               {"name": "CanaryReranker"}, defaults=reranker))
    if settings.index.shards > 1:
        from steadyrank.serve.server.hosting.shards import RetrieverShard, ShardedRetriever, shard_options

        shards = [Component(f"retriever_shard_{i}", RetrieverShard, (settings, i), shard_options(settings, i),
                            section="retriever", defaults={"name": "RetrieverShard"}) for i in range(settings.index.shards)]
        graph += [*shards, Component("retriever", ShardedRetriever, (settings, HUB, *(Ref(s.key) for s in shards)),
                                     defaults={"name": "Retriever"})]
    else:
        graph.append(Component("retriever", Retriever, (settings,), defaults={"name": "Retriever"}))
    graph.append(Component("searcher", Searcher, (settings, Ref("embedder"), Ref("retriever"), Ref("reranker"),
                                                  Ref("canary_reranker") if canary else None, HUB),
                           defaults={"name": "Searcher"}))
    if settings.quality.enabled:
        from steadyrank.serve.server.quality.evaluator import ShadowEvaluator
        from steadyrank.serve.server.quality.service import GoldenProfile

        variants = ("primary", "canary") if canary else ("primary",)
        profile = GoldenProfile(settings.search.default_mode, settings.search.denoise)
        live = settings.quality.live_judging
        judge = functools.partial(live_judge, live.judge) if live.enabled else None
        graph.append(Component("evaluator", ShadowEvaluator,
                               (settings.quality, Ref("searcher"), HUB, variants, profile, judge),
                               defaults=EVALUATOR_DEFAULTS))
    return graph

"""``build_app``: settings → the bound Ray Serve application.

The import path of Ray Serve configs is ``steadyrank.serve.app:build_app`` (``deploy/serve_config.yaml``,
``deploy/kuberay/rayservice.yaml``), called with the application's ``args``:

- ``settings``: path of a YAML/JSON settings file (relative to the working directory, else to the
  project root), a mapping of settings, a :class:`~serve.settings.Settings`, or absent for the
  embedded default (``$STEADYRANK_SETTINGS`` when set).

Without an API key, an application whose Ray Serve listens on a non-loopback address is refused
here (and again by each Ingress replica as it starts): :mod:`serve.server.hosting.exposure`.

``deployments.layout: colocated`` (the default) binds one deployment, ``Ingress``, whose replica
holds every component below as an object (:mod:`serve.server.hosting.colocated`). ``split`` binds the
graph (every box a deployment; options per deployment from ``settings.deployments``)::

    Ingress ─▶ Searcher ─▶ Embedder, Retriever, Reranker [, CanaryReranker]
                             └─▶ RetrieverShard0 … N−1 (index.shards > 1: the Retriever scatter-gathers)
       │  └──▶ Embedder, Reranker (/v1/embeddings, /v1/rerank)
       └────▶ ShadowEvaluator (quality.enabled) ─▶ Searcher
    every replica ─▶ MetricsHub ◀─ /metrics

>>> from ray import serve
>>> from steadyrank.serve.app import build_app
>>> serve.run(build_app({"settings": "deploy/settings.yaml"}), name="steadyrank", route_prefix="/")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from steadyrank.serve.server.golden_guard import apply_guard
from steadyrank.serve.settings import Settings, SettingsError, check_files, load_settings

PROJECT_ROOT = Path(__file__).resolve().parents[3]


def resolve_settings(source: Any) -> Settings:
    """Load and check the settings named by a ``build_app`` argument (errors name the field); model
    Hub ids are downloaded or found in the Hub cache here (:mod:`serve.server.model_refs`), and the
    own-corpus guard (:mod:`serve.server.golden_guard`) switches the evaluator off for a user index
    without a golden set."""
    if isinstance(source, (str, Path)):
        path = Path(source).expanduser()
        if not path.is_absolute() and not path.exists() and (PROJECT_ROOT / path).is_file():
            path = PROJECT_ROOT / path
        source = path
    from steadyrank.serve.server.model_refs import resolve_model_refs

    # a user index without a golden set: evaluator off
    settings = apply_guard(resolve_model_refs(load_settings(source)))
    check_files(settings)
    return settings


def build_app(args: dict[str, Any] | None = None) -> Any:
    """The bound application (``ray.serve.Application``) for ``args`` (see the module docstring):
    the components of :func:`serve.server.hosting.graph.components`, each bound as a deployment (split), or
    the one Ingress that builds them all (colocated)."""
    from steadyrank.serve.server.hosting.exposure import check_exposure
    from steadyrank.serve.server.hosting.graph import INGRESS_ARGS, components
    from steadyrank.serve.server.hosting.ingress import Ingress

    args = dict(args or {})
    unknown = sorted(set(args) - {"settings"})
    if unknown:
        raise SettingsError(f"build_app: unknown argument(s) {unknown}; the only argument is 'settings'")
    settings = resolve_settings(args.get("settings"))
    check_exposure(settings)  # no key on a non-loopback address: refused here, before anything is deployed
    d = settings.deployments
    # replicas finish their ongoing requests for up to the shutdown grace before they stop
    grace_s = settings.server.shutdown_grace_s
    if d.layout == "colocated":  # one replica builds every component itself (serve.server.hosting.colocated)
        options = d.colocated_options(canary=settings.canary is not None, evaluator=settings.quality.enabled)
        return Ingress.options(**options, graceful_shutdown_timeout_s=grace_s).bind(settings)
    bound: dict[str, Any] = {}
    for component in components(settings):
        deployment = component.deployment().options(**component.ray_options(settings), graceful_shutdown_timeout_s=grace_s)
        bound[component.key] = deployment.bind(*component.resolved(lambda ref: bound[ref.key]))
    ingress = Ingress.options(**d.ingress.ray_options(), graceful_shutdown_timeout_s=grace_s)
    return ingress.bind(settings, *(bound.get(k) for k in INGRESS_ARGS))

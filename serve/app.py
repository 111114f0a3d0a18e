"""The steadyrank Ray Serve application.

``steadyrank.serve.app:build_app`` is the import path Ray Serve configs use (``deploy/serve_config.yaml``,
``deploy/kuberay/rayservice.yaml``): ``build_app({"settings": "path/to/settings.yaml"})`` returns
the bound application. Modules, one job each:

- :mod:`serve.settings`    — the settings model, file loading and validation;
- :mod:`serve.server.http.schemas`    — HTTP request/response schemas (Cohere/Jina, OpenAI shapes);
- :mod:`serve.server.http.errors`      — error kind → HTTP status and each dialect's error body;
- :mod:`serve.server.priority`    — user work before shadow work in a replica;
- :mod:`serve.server.components` — one module per deployment (Embedder, Reranker, Retriever, Searcher, MetricsHub);
- :mod:`serve.server.http`        — ``create_app``: the HTTP layer (middleware, dependencies, gateway, routers);
- :mod:`serve.server.hosting.ingress`     — the Ray Serve ``Ingress`` deployment mounting it;
- :mod:`serve.server.default`     — the embedded default (demo corpus, index cache);
- :mod:`serve.server.hosting.builder`     — ``build_app``.
"""

from __future__ import annotations

from typing import Any


def build_app(args: dict[str, Any] | None = None):  # noqa: ANN201 - ray.serve.Application
    """Build the bound application (see :func:`serve.server.hosting.builder.build_app`)."""
    from steadyrank.serve.server.hosting.builder import build_app as _build

    return _build(args)


__all__ = ["build_app"]

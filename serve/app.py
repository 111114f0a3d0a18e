"""The import path of the steadyrank Ray Serve application, ``steadyrank.serve.app:build_app``.

Ray Serve configs name it (``deploy/serve_config.yaml``, ``deploy/kuberay/rayservice.yaml``, a
user's ``serve run steadyrank.serve.app:build_app``): ``build_app({"settings": "path/to/settings.yaml"})``
returns the bound application. It stays here, a stable alias, while the application itself lives in
:mod:`serve.server` (the builder: :func:`serve.server.hosting.builder.build_app`; the layout:
docs/ARCHITECTURE.md, "Inside serve/"). Importing this module imports nothing else.
"""

from __future__ import annotations

from typing import Any


def build_app(args: dict[str, Any] | None = None):  # noqa: ANN201 - ray.serve.Application
    """Build the bound application (see :func:`serve.server.hosting.builder.build_app`)."""
    from steadyrank.serve.server.hosting.builder import build_app as _build

    return _build(args)


__all__ = ["build_app"]

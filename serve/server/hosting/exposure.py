"""Closed by default wherever the application is built: no API key, no non-loopback address.

``steadyrank serve`` checks its own ``--host`` / ``http.host`` before it starts anything; this
module makes the same check (:meth:`~serve.settings.AuthSettings.check_bind`) against the
address Ray Serve really binds, so ``serve run``, ``serve deploy``, a KubeRay ``RayService`` and
``serve.run(build_app(...))`` refuse to come up open as well. It runs twice:

- in :func:`serve.server.hosting.builder.build_app` (the driver of ``steadyrank serve`` and of ``serve run``,
  or the Serve controller's build task of ``serve deploy`` and KubeRay): the application is never
  deployed, and the error names the address and where the keys may come from;
- in every ``Ingress`` replica as it starts, which asks the Serve controller (always running by
  then): an application built before Serve was started with another address (``serve.run`` after
  ``build_app``, ``serve run <import path>`` against a cluster whose Serve already listens
  elsewhere) fails to start instead of serving open.

The address is Ray Serve's ``http_options.host``: what its HTTP proxies bind on every node, and,
with Serve's direct ingress (HAProxy), what each Ingress replica's own HTTP server binds. An unset
host (``None``) counts as every interface (HAProxy's front then binds ``*``).
"""

from __future__ import annotations

from steadyrank.serve.settings import Settings

#: where the checked address comes from, named in the refusal
ORIGIN = "Ray Serve's http_options.host"
#: seconds the controller gets to answer
CONTROLLER_TIMEOUT_S = 30.0


def serve_http_host() -> str | None:
    """The address Ray Serve binds: the running Serve controller's ``http_options.host`` when this
    process is connected to a Ray cluster that runs Serve, else the one ``serve.start`` would use
    (``HTTPOptions``' default: ``$RAY_SERVE_DEFAULT_HTTP_HOST``; every interface under
    ``RAY_SERVE_ENABLE_HA_PROXY=1``; else 127.0.0.1)."""
    import ray
    from ray.serve.config import HTTPOptions

    if ray.is_initialized():
        from ray.serve._private.constants import SERVE_CONTROLLER_NAME, SERVE_NAMESPACE

        try:
            controller = ray.get_actor(SERVE_CONTROLLER_NAME, namespace=SERVE_NAMESPACE)
        except ValueError:  # Serve is not running on this cluster yet
            controller = None
        if controller is not None:
            options: HTTPOptions = ray.get(controller.get_http_config.remote(), timeout=CONTROLLER_TIMEOUT_S)
            return options.host
    return HTTPOptions().host


def check_exposure(settings: Settings) -> int:
    """The number of active API keys; a :class:`~serve.settings.SettingsError` when there is
    none, ``allow_anonymous`` is off and :func:`serve_http_host` is not a loopback address. A keys
    file that cannot be read or holds no key is an error either way."""
    host = serve_http_host()
    return settings.auth.check_bind(host if host is not None else "0.0.0.0", origin=ORIGIN)

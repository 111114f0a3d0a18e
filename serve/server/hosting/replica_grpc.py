"""Each Ray Serve replica's inter-deployment gRPC server on loopback when its node is loopback.

Ray Serve (2.60) starts a gRPC server in every replica for calls between deployments and binds it to
``[::]:0``, every interface, whatever the node's address (``ray/serve/_private/replica.py``,
``ReplicaBase._on_initialized``: ``add_port_to_grpc_server(self._server, "[::]:0")``). Callers reach
it at ``<node ip>:<port>`` (``request_router/replica_wrapper.py``), so on a node whose address is a
loopback one (a local head: :data:`serve.launcher.ray_env.LOCAL_HEAD_ENV`) nobody needs the other
interfaces, and a server bound to 127.0.0.1 would otherwise still listen on the network.

:func:`bind_replica_grpc_to_node` wraps the ``add_port_to_grpc_server`` that ``replica.py`` calls so
that a wildcard host becomes the node's loopback address. It runs first in every replica's
constructor, before ``_on_initialized`` binds the server: the ``Ingress`` calls it, and each
component's deployment class is the component under :func:`binding_on_node`
(:meth:`serve.server.hosting.graph.Component.deployment`; the components themselves are plain
classes without Ray). Outside a Ray worker process, or on a node with a network address, it changes nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from steadyrank.serve.settings import is_loopback

#: the wildcard hosts Ray may pass; any other host is left as given
WILDCARD_HOSTS = frozenset({"[::]", "0.0.0.0", ""})
_MARK = "_steadyrank_binds_on"
#: the function ``ray/serve/_private/replica.py`` imports and calls to bind the server
_RAY_NAME = "add_port_to_grpc_server"


def on_host(address: str, host: str) -> str:
    """``address`` (``host:port``) with a wildcard host replaced by ``host``; other addresses unchanged."""
    bound, _, port = address.rpartition(":")
    if bound not in WILDCARD_HOSTS:
        return address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind_replica_grpc_to_node() -> str | None:
    """In a Ray worker process (a replica) whose node address is a loopback one, make the replica's
    inter-deployment gRPC server bind that address instead of every interface; returns the address
    it will bind, or None where nothing changed (not a Ray worker, or a network address).
    Idempotent."""
    if "ray" not in sys.modules:  # not a Ray process: nothing to change, and no Ray to import
        return None
    from ray._private import worker

    if worker.global_worker.mode != worker.WORKER_MODE:  # a driver (the CLI, a test), not a replica
        return None
    import ray
    import ray.serve._private.replica as replica

    current: Callable[[Any, str], int] = getattr(replica, _RAY_NAME)
    bound_on = getattr(current, _MARK, None)
    if bound_on is not None:
        return str(bound_on)
    node_ip = ray.util.get_node_ip_address()
    if not is_loopback(node_ip):
        return None

    def add_port_on_node(server: Any, address: str) -> int:
        return current(server, on_host(address, node_ip))

    setattr(add_port_on_node, _MARK, node_ip)
    setattr(replica, _RAY_NAME, add_port_on_node)  # looked up by name when _on_initialized binds
    return node_ip


class _BindsFirst:
    """The first base of a deployment class (:func:`binding_on_node`): binds, then constructs the component."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        bind_replica_grpc_to_node()  # before Ray Serve's _on_initialized binds the replica's gRPC server
        super().__init__(*args, **kwargs)


def binding_on_node(cls: type) -> type:
    """``cls`` as a Ray Serve replica's class: a subclass of the same name whose constructor calls
    :func:`bind_replica_grpc_to_node` before ``cls``'s. Ray pickles it by value (it is not found
    under its module), its bases by reference."""
    return type(cls.__name__, (_BindsFirst, cls), {"__module__": __name__, "__doc__": cls.__doc__})

"""The replica's inter-deployment gRPC server binds the loopback node's address, not ``[::]``:
:mod:`serve.server.hosting.replica_grpc` against Ray Serve's real ``replica`` module and a real gRPC server
(the served check, ``ss -ltnp`` of a whole server, is ``tests/serve/test_lifecycle.py``)."""

from __future__ import annotations

import importlib
import ipaddress
from concurrent.futures import ThreadPoolExecutor

import grpc
import psutil
import pytest
import ray
from ray._private import worker

from steadyrank.serve.server.hosting.graph import components
from steadyrank.serve.server.hosting.replica_grpc import _MARK, bind_replica_grpc_to_node, binding_on_node, on_host
from steadyrank.serve.settings import load_settings


@pytest.mark.parametrize(("address", "host", "expected"), [
    ("[::]:0", "127.0.0.1", "127.0.0.1:0"),
    ("0.0.0.0:5000", "127.0.0.1", "127.0.0.1:5000"),
    ("[::]:0", "::1", "[::1]:0"),
    ("10.1.2.3:0", "127.0.0.1", "10.1.2.3:0"),  # a host that is not a wildcard stays
])
def test_on_host_replaces_only_a_wildcard(address: str, host: str, expected: str) -> None:
    assert on_host(address, host) == expected


def _listening(port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses listening on ``port``, an IPv4 address mapped into IPv6 as the IPv4 one."""
    found = [ipaddress.ip_address(c.laddr.ip) for c in psutil.net_connections("tcp")
             if c.status == psutil.CONN_LISTEN and c.laddr.port == port]
    return [getattr(ip, "ipv4_mapped", None) or ip for ip in found]


def test_a_replica_on_a_loopback_node_binds_its_grpc_server_on_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    replica = importlib.import_module("ray.serve._private.replica")
    monkeypatch.setattr(replica, "add_port_to_grpc_server", replica.add_port_to_grpc_server)  # restored after
    monkeypatch.setattr(worker.global_worker, "mode", worker.WORKER_MODE)  # as in a replica process
    monkeypatch.setattr(ray.util, "get_node_ip_address", lambda: "127.0.0.1")
    assert bind_replica_grpc_to_node() == "127.0.0.1"
    assert bind_replica_grpc_to_node() == "127.0.0.1"  # idempotent: wrapped once
    server = grpc.server(ThreadPoolExecutor(max_workers=1))
    try:
        port = replica.add_port_to_grpc_server(server, "[::]:0")  # what Ray Serve's _on_initialized calls
        server.start()
        assert port > 0 and _listening(port) == [ipaddress.ip_address("127.0.0.1")]
    finally:
        server.stop(None)


def test_a_node_with_a_network_address_is_left_as_ray_binds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    replica = importlib.import_module("ray.serve._private.replica")
    original = replica.add_port_to_grpc_server
    monkeypatch.setattr(replica, "add_port_to_grpc_server", original)
    monkeypatch.setattr(worker.global_worker, "mode", worker.WORKER_MODE)
    monkeypatch.setattr(ray.util, "get_node_ip_address", lambda: "10.1.2.3")
    assert bind_replica_grpc_to_node() is None
    assert replica.add_port_to_grpc_server is original


def test_a_driver_process_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI and tests import the deployments too: outside a Ray worker nothing is wrapped."""
    replica = importlib.import_module("ray.serve._private.replica")
    original = replica.add_port_to_grpc_server
    monkeypatch.setattr(ray.util, "get_node_ip_address", lambda: "127.0.0.1")
    assert worker.global_worker.mode != worker.WORKER_MODE
    assert bind_replica_grpc_to_node() is None
    assert replica.add_port_to_grpc_server is original


class _Component:
    """A stand-in plain component: records whether the replica's bind was wrapped when it was constructed."""

    def __init__(self, seen: list[str | None]) -> None:
        replica = importlib.import_module("ray.serve._private.replica")
        seen.append(getattr(replica.add_port_to_grpc_server, _MARK, None))


def test_a_components_replica_binds_before_its_constructor_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The components are plain classes; their deployment class (what Ray pickles and a replica
    constructs before ``_on_initialized``) binds first, also after Ray's pickling."""
    replica = importlib.import_module("ray.serve._private.replica")
    monkeypatch.setattr(replica, "add_port_to_grpc_server", replica.add_port_to_grpc_server)
    monkeypatch.setattr(worker.global_worker, "mode", worker.WORKER_MODE)
    monkeypatch.setattr(ray.util, "get_node_ip_address", lambda: "127.0.0.1")
    hosted = ray.cloudpickle.loads(ray.cloudpickle.dumps(binding_on_node(_Component)))
    assert hosted.__name__ == "_Component" and issubclass(hosted, _Component)
    seen: list[str | None] = []
    hosted(seen)
    assert seen == ["127.0.0.1"]


def test_every_deployment_of_the_graph_is_its_component_binding_first() -> None:
    for component in components(load_settings({"deployments": {"layout": "split"}})):
        hosted = component.deployment().func_or_class
        assert issubclass(hosted, component.cls) and hosted.__mro__[1].__name__ == "_BindsFirst", component.key

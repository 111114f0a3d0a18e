"""Node and replica health for /readyz and the replica gauge (serve.server.hosting.health, MetricsHub).

The node probe is checked against real sockets and the session's real Ray node; losing a node of a
real two-node cluster is tests/cluster/test_two_nodes.py."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time

import pytest

from steadyrank.serve.server.components.metrics_hub import REPLICAS_METRIC, ReplicaGauge
from steadyrank.serve.server.hosting import health
from steadyrank.serve.server.hosting.health import _answers, lost_nodes, replica_health
from steadyrank.serve.server.http.routers.health import DEAD_REPLICA_BOUND_S, READY_CACHE_S


def test_a_listening_port_answers_and_a_closed_one_does_not():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    open_port = listener.getsockname()[1]
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()  # bound then released: nothing listens there
    try:
        assert asyncio.run(_answers("127.0.0.1", open_port, 1.0)) is True
        assert asyncio.run(_answers("127.0.0.1", closed_port, 1.0)) is False
    finally:
        listener.close()


@pytest.mark.parametrize(("counts", "alive", "degraded", "serving"), [
    ({"RUNNING": 2}, 2, None, True),
    ({"RUNNING": 2}, 3, None, True),  # a replacement registered before the controller counts it
    ({"RUNNING": 1}, 0, {"dead": 1}, False),  # the case of tests/serve/test_lifecycle.py
    ({"RUNNING": 2}, 1, {"dead": 1}, True),
    ({"RUNNING": 1, "STARTING": 1}, 2, {}, True),
    ({"RUNNING": 1, "STARTING": 1}, 1, {"dead": 1}, False),  # which one died is unknown: the cautious reading
    ({"STARTING": 1}, 1, {}, False),
])
def test_replica_health_counts_replicas_the_gcs_no_longer_lists_as_dead(monkeypatch, counts, alive, degraded, serving):
    """The controller's counts against the replica actors the GCS lists alive (stand-ins for both:
    the real ones need a replica killed, the test below)."""
    monkeypatch.setattr(health, "replica_states", lambda app: {"Reranker": ("HEALTHY", counts)})
    monkeypatch.setattr(health, "live_replicas", lambda app: {"Reranker": alive, "Other": 1})
    got = health.replica_health("steadyrank")
    expected = None if degraded is None else {"status": "HEALTHY", "replicas": counts} | degraded
    assert (got.degraded.get("Reranker"), got.serving) == (expected, serving)


def test_the_live_local_node_is_not_lost(ray_session):
    assert asyncio.run(lost_nodes()) == []


def test_replica_gauge_sets_vanished_states_back_to_zero():
    gauge = ReplicaGauge()
    first = gauge.updates({"Reranker": ("UPDATING", {"RUNNING": 1, "STARTING": 1})})
    assert first == [("set", REPLICAS_METRIC, ("Reranker", "RUNNING"), 1.0),
                     ("set", REPLICAS_METRIC, ("Reranker", "STARTING"), 1.0)]
    second = gauge.updates({"Reranker": ("HEALTHY", {"RUNNING": 2})})
    assert second == [("set", REPLICAS_METRIC, ("Reranker", "RUNNING"), 2.0),
                      ("set", REPLICAS_METRIC, ("Reranker", "STARTING"), 0.0)]


def test_a_killed_replica_is_dead_to_the_readiness_check_within_a_second(serve_app):
    """SIGKILL of a replica's process: :func:`replica_health` says its deployment is degraded, with
    one dead replica and nothing serving, within 1 s (the GCS part of /readyz's documented
    ``DEAD_REPLICA_BOUND_S``), while the Serve controller may count it RUNNING for up to its
    health-check period (10 s); it is healthy again once the controller's replacement runs."""
    from ray import serve as ray_serve

    @ray_serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 0})
    class Pid:
        def __call__(self) -> int:
            return os.getpid()

    app = "replica-loss-probe"
    handle = ray_serve.run(Pid.bind(), name=app, route_prefix=None)
    try:
        pid = handle.remote().result(timeout_s=120)
        assert replica_health(app).healthy
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        while (got := replica_health(app)).healthy:
            assert time.monotonic() < killed + 60, "the dead replica was never noticed"
            time.sleep(0.02)
        noticed_s = time.monotonic() - killed
        controller = health.replica_states(app)
        print(f"\n[health] a killed replica was dead to replica_health {noticed_s:.3f} s after the kill "
              f"(the controller then said {controller})")
        assert got.degraded["Pid"]["dead"] == 1 and not got.serving, got
        assert noticed_s <= DEAD_REPLICA_BOUND_S - READY_CACHE_S, f"noticed {noticed_s:.2f} s after the kill"
        while not (got := replica_health(app)).healthy:  # the controller replaces it
            assert time.monotonic() < killed + 180, f"not replaced: {got}"
            time.sleep(0.2)
        assert handle.remote().result(timeout_s=60) != pid
    finally:
        ray_serve.delete(app)

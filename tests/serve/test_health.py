"""Node and replica health for /readyz and the replica gauge (serve.server.hosting.health, MetricsHub).

The node probe is checked against real sockets and the session's real Ray node; losing a node of a
real two-node cluster is tests/cluster/test_two_nodes.py."""

from __future__ import annotations

import asyncio
import socket

from steadyrank.serve.server.components.metrics_hub import REPLICAS_METRIC, ReplicaGauge
from steadyrank.serve.server.hosting.health import _answers, lost_nodes


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

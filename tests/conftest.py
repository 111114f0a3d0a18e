"""Session-wide fixtures shared by every test package.

``ray_session``: one local Ray instance for the whole test session (Ray Serve integration tests in
``tests/serve`` and the quality/Prometheus tests build on it). Ray is started on first use only,
so test runs that never touch Ray never pay for it, and shut down at the end of the session.
"""

from __future__ import annotations

import os

import pytest

#: Logical CPUs of the test Ray instance; replicas in the test app reserve fractions of one.
RAY_TEST_CPUS = 2


@pytest.fixture(scope="session")
def ray_session():
    """The session's Ray instance (``ray`` module); Serve and Ray are shut down at session end."""
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from steadyrank.serve.launcher.ray_env import apply_ray_env

    apply_ray_env()  # the Ray tuning `steadyrank serve` runs with
    started = False
    if not ray.is_initialized():
        ray.init(
            num_cpus=RAY_TEST_CPUS,
            include_dashboard=False,
            log_to_driver=False,  # replica logs stay in /tmp/ray/session_latest/logs
            namespace="steadyrank-tests",
        )
        started = True
    yield ray
    if started:
        try:
            from ray import serve as ray_serve

            ray_serve.shutdown()
        finally:
            ray.shutdown()


#: Fixtures that start (or need) the session's Ray instance.
RAY_FIXTURES = {"ray_session", "serve_app"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tier markers, set from where a test lives and what it uses: ``ray`` (starts or needs Ray:
    the ``ray_session`` fixture, a served app, a server or a cluster), ``cluster`` (tests/cluster:
    a multi-node Ray cluster), ``lifecycle`` (tests/serve/test_lifecycle.py: whole ``steadyrank
    serve`` processes). ``make test-fast`` runs the rest (``-m "not ray"``)."""
    for item in items:
        parts = item.path.parts
        needs_ray = bool(RAY_FIXTURES & set(getattr(item, "fixturenames", ())))
        if "cluster" in parts:
            item.add_marker(pytest.mark.cluster)
            needs_ray = True
        if item.path.name == "test_lifecycle.py":
            item.add_marker(pytest.mark.lifecycle)
            needs_ray = True
        if needs_ray:
            item.add_marker(pytest.mark.ray)

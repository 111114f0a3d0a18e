"""Session-wide fixtures shared by every test package, and the test tiers (tests/tiers.py).

``ray_session``: one local Ray instance for the whole test session (Ray Serve integration tests in
``tests/serve`` and the quality/Prometheus tests build on it). Ray is started on first use only,
so test runs that never touch Ray never pay for it, and shut down at the end of the session.

``fresh_imports``: what one fresh interpreter, outside the source tree, imports at each step (the
layering tests of tests/test_layout.py and tests/retrieval/test_boundaries.py share it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests import tiers
from tests.tiers import e2e_fixture

#: Logical CPUs of the test Ray instance; replicas in the test app reserve fractions of one.
RAY_TEST_CPUS = 2


@pytest.fixture(scope="session")
@e2e_fixture
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


FRESH_IMPORTS = """
import importlib, json, pkgutil, sys
report = {}
def new_since(before):
    return sorted(set(sys.modules) - before)
before = set(sys.modules)
import steadyrank.metrics as metrics
for info in pkgutil.iter_modules(metrics.__path__):
    importlib.import_module("steadyrank.metrics." + info.name)
report["metrics"] = new_since(before)
report["bare"] = []
for bare in ("metrics", "retrieval", "serve"):
    try:
        importlib.import_module(bare)
    except ModuleNotFoundError:
        continue
    report["bare"].append(bare)
import steadyrank.retrieval, steadyrank.retrieval.calibration, steadyrank.retrieval.pipeline
report["after_retrieval"] = sorted(sys.modules)
report["stdlib"] = sorted(sys.stdlib_module_names)
print(json.dumps(report))
"""


@pytest.fixture(scope="session")
@e2e_fixture
def fresh_imports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One fresh interpreter, run outside the source tree, in steps: ``metrics`` (the modules that
    importing every ``steadyrank.metrics`` module added), ``bare`` (the bare folder names
    ``metrics``/``retrieval``/``serve`` that were importable), ``after_retrieval`` (every module
    loaded once ``steadyrank.retrieval`` and its calibration and pipeline were imported too) and
    ``stdlib`` (``sys.stdlib_module_names``)."""
    out = subprocess.run([sys.executable, "-c", FRESH_IMPORTS], cwd=tmp_path_factory.mktemp("fresh"),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def pytest_configure(config: pytest.Config) -> None:
    """The test tiers (unit, integration, e2e): see tests/tiers.py."""
    if not config.pluginmanager.is_registered(tiers):
        config.pluginmanager.register(tiers, "steadyrank-tiers")
    _build_matplotlib_font_cache()


def _build_matplotlib_font_cache() -> None:
    """matplotlib builds its font cache the first time it is imported on a machine (or in a new
    version), running ``fc-list`` in a child process: done here, before any test runs, so that no
    unit or integration test that plots starts a process for it (tests/tiers.py would refuse it)."""
    import matplotlib

    matplotlib.use("Agg")  # headless: the plots are written to files
    from matplotlib import font_manager  # noqa: F401  (the import builds the cache)

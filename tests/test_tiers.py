"""The test tiers (tests/tiers.py): how a test gets its tier, and the guard that keeps the two fast
tiers free of processes and Ray. Each case runs a small test file through pytest in this process
(``pytester``), under the suite's own tier plugin."""

from __future__ import annotations

import importlib.util

import pytest

from tests.tiers import FAST_TIERS, TierError, no_processes, tier_of

CONFTEST = """
import pytest
from tests import tiers
from tests.tiers import e2e_fixture, integration_fixture

def pytest_configure(config):
    config.pluginmanager.register(tiers, "steadyrank-tiers")

@pytest.fixture
@e2e_fixture
def server():
    return "started elsewhere"

@pytest.fixture
def uses_server(server):
    return server

@pytest.fixture
@integration_fixture
def model():
    return "weights"
"""


def _tiers(pytester: pytest.Pytester, source: str) -> dict[str, list[str]]:
    """``{test name: its tier marks}`` of the tests in ``source``, as collected."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_sample=source)
    items, _ = pytester.inline_genitems()
    return {item.name: [m.name for m in item.iter_markers() if m.name in ("unit", "integration", "e2e")]
            for item in items}


def test_a_test_gets_the_highest_tier_that_its_marks_and_fixtures_declare(pytester: pytest.Pytester) -> None:
    assert _tiers(pytester, """
import pytest

def test_plain(): pass
def test_model(model): pass
def test_server(server): pass
def test_server_through_another_fixture(uses_server): pass
def test_both(model, server): pass
@pytest.mark.e2e
def test_marked(): pass
@pytest.mark.e2e
class TestMarkedClass:
    def test_inside(self, model): pass
""") == {"test_plain": ["unit"], "test_model": ["integration"], "test_server": ["e2e"],
         "test_server_through_another_fixture": ["e2e"], "test_both": ["e2e"], "test_marked": ["e2e"],
         "test_inside": ["e2e"]}


def test_a_module_mark_sets_the_tier_of_its_tests(pytester: pytest.Pytester) -> None:
    assert _tiers(pytester, """
import pytest
pytestmark = pytest.mark.integration
def test_one(): pass
def test_two(server): pass
""") == {"test_one": ["integration"], "test_two": ["e2e", "integration"]}


def how_refused(how: str) -> str:
    """What the guard names as refused for each way of starting a process."""
    if how in ("fork", "spawnv", "multiprocessing_fork"):
        return "os.fork"
    if how == "os_system":
        return "os.system"
    if how == "posix_spawn":
        return "os.posix_spawn"
    if how == "multiprocessing_spawn":
        return "fork_exec"
    return "subprocess"


SPAWNERS = {
    "subprocess_run": "subprocess.run(['true'])",
    "popen": "subprocess.Popen(['true']).wait()",
    "check_output": "subprocess.check_output(['true'])",
    "os_system": "os.system('true')",
    "os_popen": "os.popen('true').read()",
    "fork": "os.fork()",
    "posix_spawn": "os.posix_spawn('/bin/true', ['true'], {})",
    "spawnv": "os.spawnv(os.P_WAIT, '/bin/true', ['true'])",
    "asyncio": "asyncio.run(asyncio.create_subprocess_exec('true'))",
    "multiprocessing_spawn": "multiprocessing.get_context('spawn').Process(target=print).start()",
    "multiprocessing_fork": "multiprocessing.get_context('fork').Process(target=print).start()",
}


@pytest.mark.parametrize("how", sorted(SPAWNERS))
def test_a_fast_test_that_starts_a_process_fails_before_it_starts(pytester: pytest.Pytester, how: str) -> None:
    """Every way to start a process fails in a unit test, in its body and in a fixture it uses
    (the guard refuses before any process exists, so this test starts none itself)."""
    pytester.makeconftest(CONFTEST)
    call = SPAWNERS[how]
    pytester.makepyfile(test_sample=f"""
import asyncio, multiprocessing, os, subprocess
import pytest

@pytest.fixture
def spawned():
    {call}

def test_body():
    {call}

def test_fixture(spawned):
    pass
""")
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, errors=1)
    out = result.stdout.str()
    # refused by the guard of the sample's own tests (this test's guard would name this test)
    for test in ("test_body", "test_fixture"):
        assert f"TierError: a unit or integration test started a process ({how_refused(how)}): " \
               f"test_sample.py::{test};" in out, out


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")
def test_a_fast_test_that_starts_ray_fails(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_sample="""
import ray

def test_ray():
    ray.init(num_cpus=1)
""")
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    assert "TierError: a unit or integration test started Ray (ray.init): test_sample.py::test_ray;" in result.stdout.str()


def test_the_guard_restores_what_it_replaced() -> None:
    import _posixsubprocess
    import os
    import subprocess

    before = (subprocess.Popen._execute_child, _posixsubprocess.fork_exec, os.fork, os.posix_spawn, os.system)
    with no_processes("here"), pytest.raises(TierError, match="os.fork"):
        os.fork()
    assert (subprocess.Popen._execute_child, _posixsubprocess.fork_exec, os.fork, os.posix_spawn, os.system) == before


def test_every_selected_test_of_the_suite_carries_its_tier_and_only_e2e_ones_carry_e2e(
        request: pytest.FixtureRequest) -> None:
    """So ``-m "not e2e"`` selects exactly the fast tiers (``-m unit`` exactly the unit tier)."""
    for item in request.session.items:
        tier = tier_of(item)
        assert item.get_closest_marker(tier) is not None, item.nodeid
        assert (item.get_closest_marker("e2e") is None) == (tier in FAST_TIERS), item.nodeid
        assert (item.get_closest_marker("unit") is None) == (tier != "unit"), item.nodeid

"""Test tiers, decided by what a test uses and enforced while it runs (a pytest plugin that
tests/conftest.py registers).

- ``unit``: in process, no Ray, no other process;
- ``integration``: in process too, but through a real assembly of parts: the HTTP application
  (``create_app``, on httpx's ASGI transport or an in-thread uvicorn) or model weights in torch;
- ``e2e``: starts Ray or another process (a CLI run, a fresh interpreter, a server, a cluster).

The rule: a test is ``e2e`` when it, its module or its class carries the ``e2e`` mark, when one of
the fixtures it uses (directly or through other fixtures) is declared with :func:`e2e_fixture`, or
when it lives in ``tests/cluster``; otherwise ``integration`` when marked so, using a fixture
declared with :func:`integration_fixture`, or living in ``tests/http`` or ``tests/runtime``
(``FOLDER_TIERS``);
otherwise ``unit``. Each test gets exactly one of the three marks
(``make test-fast`` runs ``-m "not e2e"``, ``make test-unit`` ``-m unit``).

Enforced: while a test of the two fast tiers runs (its setup and call; not its teardown, where
the fixtures of earlier e2e tests may be finalised), starting a
process raises :class:`TierError`, whatever starts it: ``subprocess`` (so ``asyncio``'s subprocesses
and ``os.popen`` too), ``os.fork``/``forkpty``/``posix_spawn``/``system`` (so ``os.spawn*`` and
``multiprocessing``) and ``_posixsubprocess.fork_exec``. Ray cannot start without processes (its GCS
and raylet), and ``ray.init`` raises too when ``ray`` is loaded, so a fast test that would start or
join Ray fails instead of running slowly (``tests/test_tiers.py`` checks this guard).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

TIERS = ("unit", "integration", "e2e")
FAST_TIERS = ("unit", "integration")

F = TypeVar("F", bound=Callable[..., Any])


class TierError(RuntimeError):
    """A test of a fast tier tried to start a process or Ray."""


def e2e_fixture(func: F) -> F:
    """Declare a fixture function as starting (or needing) Ray or processes: every test using it is
    ``e2e``. Apply below ``@pytest.fixture``."""
    func.__dict__["tier"] = "e2e"
    return func


def integration_fixture(func: F) -> F:
    """Declare a fixture function as assembling real parts in process (the HTTP app, model weights):
    every test using it is at least ``integration``. Apply below ``@pytest.fixture``."""
    func.__dict__["tier"] = "integration"
    return func


def _fixture_tiers(item: pytest.Item) -> set[str]:
    """The tiers declared by the fixtures ``item`` uses (its closure: the fixtures of its fixtures too)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return set()
    tiers = set()
    for definitions in info.name2fixturedefs.values():
        for definition in definitions:
            tier = getattr(definition.func, "tier", None)
            if tier is not None:
                tiers.add(tier)
    return tiers


#: Folders of tests/ whose every test is at least of a tier: the HTTP layer in process, the model
#: runtime (tiny random or bundled weights in torch), the clusters.
FOLDER_TIERS = {"http": "integration", "runtime": "integration", "cluster": "e2e"}
TESTS = Path(__file__).resolve().parent


def _folder_tier(item: pytest.Item) -> set[str]:
    try:
        folder = item.path.resolve().relative_to(TESTS).parts[0]
    except ValueError:  # a test file outside tests/ (tests/test_tiers.py's samples)
        return set()
    return {FOLDER_TIERS[folder]} if folder in FOLDER_TIERS else set()


def tier_of(item: pytest.Item) -> str:
    declared = _fixture_tiers(item) | _folder_tier(item)
    declared |= {tier for tier in TIERS if item.get_closest_marker(tier) is not None}
    return next(tier for tier in reversed(TIERS) if tier in declared | {"unit"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "unit: in process, no Ray, no other process (set by tests/tiers.py)")
    config.addinivalue_line("markers", "integration: in process, through real parts: the HTTP app or model "
                                       "weights (tests/tiers.py)")
    config.addinivalue_line("markers", "e2e: starts Ray or another process (tests/tiers.py); "
                                       "`make test-fast` leaves these out")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = tier_of(item)
        if item.get_closest_marker(tier) is None:
            item.add_marker(getattr(pytest.mark, tier))
        item.stash[_TIER] = tier


_TIER = pytest.StashKey[str]()


def _refuse(what: str, who: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise TierError(f"a unit or integration test started {what}: {who}; mark the test e2e "
                        "(pytest.mark.e2e) or declare its fixture with tests.tiers.e2e_fixture")

    return refuse


@contextmanager
def no_processes(who: str) -> Iterator[None]:
    """Starting a process (or Ray) raises :class:`TierError` naming ``who`` inside this context."""
    import _posixsubprocess

    targets: list[tuple[Any, str, str]] = [
        (subprocess.Popen, "_execute_child", "a process (subprocess)"),
        (_posixsubprocess, "fork_exec", "a process (fork_exec)"),
    ]
    targets += [(os, name, f"a process (os.{name})")
                for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system") if hasattr(os, name)]
    ray = sys.modules.get("ray")
    if ray is not None and hasattr(ray, "init"):
        targets.append((ray, "init", "Ray (ray.init)"))
    with ExitStack() as stack:
        for owner, name, what in targets:
            original = getattr(owner, name)
            setattr(owner, name, _refuse(what, who))
            stack.callback(setattr, owner, name, original)
        yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    return (yield from _guarded(item))


def _guarded(item: pytest.Item) -> Iterator[None]:
    if item.stash.get(_TIER, "e2e") not in FAST_TIERS:
        return (yield)
    with no_processes(item.nodeid):
        return (yield)

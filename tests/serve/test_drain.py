"""``drain_ingress`` against a stand-in Serve API (the Ray Serve handle and status are what a test
without Ray cannot have; the real drain runs in tests/serve/test_lifecycle.py): a replica too busy
to answer one call within ``CALL_S`` is asked again, so one slow answer does not end the drain."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

from steadyrank.serve.launcher.lifecycle import drain_ingress


class _Answer:
    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome

    def result(self, timeout_s: float) -> Any:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


class _Serve:
    """One RUNNING Ingress replica whose answers to ``drain`` are ``outcomes`` in turn."""

    def __init__(self, outcomes: list[Any]) -> None:
        self.outcomes = outcomes
        self.calls = 0
        ingress = SimpleNamespace(replica_states={"RUNNING": 1})
        self.state = SimpleNamespace(applications={"app": SimpleNamespace(deployments={"Ingress": ingress})})

    def status(self) -> Any:
        return self.state

    def get_app_handle(self, app: str) -> Any:
        def remote() -> _Answer:
            self.calls += 1
            return _Answer(self.outcomes.pop(0))

        return SimpleNamespace(drain=SimpleNamespace(remote=remote))


def test_a_timed_out_drain_call_is_made_again_until_the_replica_reports_nothing_in_flight() -> None:
    serve = _Serve([TimeoutError("Timed out resolving to ObjectRef."), TimeoutError("again"),
                    {"replica": "r1", "in_flight": 0}])
    drain_ingress(serve, "app", time.monotonic() + 30, SimpleNamespace(force=threading.Event()), poll_s=0)
    assert serve.calls == 3 and not serve.outcomes

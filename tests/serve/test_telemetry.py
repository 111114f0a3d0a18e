"""The metric catalogue, the hub's registry and the Recorder (no Ray needed)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from steadyrank.serve.telemetry import CATALOGUE, MetricsStore, Recorder, TelemetryError
from tests.deploy.test_grafana import CONTRACT
from tests.serve.conftest import parse_metrics

ROOT = Path(__file__).resolve().parents[2]


def test_catalogue_is_the_contract() -> None:
    assert {name: spec.kind for name, spec in CATALOGUE.items()} == CONTRACT
    readme = (ROOT / "deploy" / "README.md").read_text()
    for name, _spec in CATALOGUE.items():
        assert f"`{name}`" in readme, name
    assert CATALOGUE["steadyrank_request_duration_seconds"].buckets == (
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
    assert CATALOGUE["steadyrank_golden_quality"].labels == ("variant", "metric", "k", "stat")
    assert CATALOGUE["steadyrank_requests_total"].labels == ("endpoint", "code", "model")


def test_metrics_reference_lists_every_metric_with_its_labels() -> None:
    section = (ROOT / "docs" / "reference" / "metrics.md").read_text()
    for name, spec in CATALOGUE.items():
        assert f"`{name}`" in section, name
        for label in spec.labels:
            assert re.search(rf"`{label}`", section), (name, label)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda r: r.inc("steadyrank_request_total", endpoint="rerank", code="200"), "did you mean 'steadyrank_requests_total'"),
        (lambda r: r.inc("steadyrank_requests_total", endpoint="rerank"), "takes labels"),
        (lambda r: r.inc("steadyrank_requests_total", endpoint="rerank", code="200", extra="x"), "takes labels"),
        (lambda r: r.observe("steadyrank_requests_total", 1.0, endpoint="rerank", code="200"), "counter"),
        (lambda r: r.set("steadyrank_batch_size", 1.0, deployment="x"), "histogram"),
        (lambda r: r.inc("steadyrank_ties_at_cutoff_total", -1), "only goes up"),
    ],
)
def test_recorder_rejects_typos_at_once(call, message: str) -> None:
    with pytest.raises(TelemetryError, match=message):
        call(Recorder(None))


def test_recorder_aggregates_and_the_store_renders() -> None:
    store = MetricsStore()
    recorder = Recorder(store, flush_interval_s=60)
    for _ in range(3):
        recorder.inc("steadyrank_requests_total", endpoint="rerank", code="200", model="m")
    recorder.inc("steadyrank_rescored_ties_total", 4)
    recorder.observe("steadyrank_request_duration_seconds", 0.02, endpoint="rerank", model="m")
    recorder.observe("steadyrank_request_duration_seconds", 3.0, endpoint="rerank", model="m")
    recorder.set("steadyrank_golden_quality", 0.5, variant="primary", metric="ndcg", k=10, stat="expected")
    recorder.set("steadyrank_golden_quality", 0.7, variant="primary", metric="ndcg", k=10, stat="expected")
    updates = recorder.drain()
    assert ("inc", "steadyrank_requests_total", ("rerank", "200", "m"), 3.0) in updates
    assert store.apply(updates) == len(updates)
    assert store.apply([("inc", "steadyrank_nope_total", (), 1.0), ("bogus",)]) == 0 and store.rejected == 2
    m = parse_metrics(store.render().decode())
    assert m[("steadyrank_requests_total", (("code", "200"), ("endpoint", "rerank"), ("model", "m")))] == 3.0
    assert m[("steadyrank_rescored_ties_total", ())] == 4.0
    assert m[("steadyrank_request_duration_seconds_count", (("endpoint", "rerank"), ("model", "m")))] == 2.0
    assert m[("steadyrank_request_duration_seconds_bucket", (("endpoint", "rerank"), ("le", "0.025"), ("model", "m")))] == 1.0
    assert m[("steadyrank_golden_quality", (("k", "10"), ("metric", "ndcg"), ("stat", "expected"), ("variant", "primary")))] == 0.7
    assert not any(name.endswith("_created") for name, _ in m)


def test_recorder_flushes_in_the_background() -> None:
    store = MetricsStore()
    recorder = Recorder(store, flush_interval_s=0.05)
    recorder.inc("steadyrank_route_decisions_total", escalated="true")
    deadline = time.monotonic() + 5
    while recorder.flushes == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    recorder.close()
    m = parse_metrics(store.render().decode())
    assert m[("steadyrank_route_decisions_total", (("escalated", "true"),))] == 1.0


def test_a_failing_hub_never_raises_into_the_caller() -> None:
    class Broken:
        class record:  # noqa: N801 - mimics handle.record.remote(...)
            @staticmethod
            def remote(_updates):
                raise ConnectionError("hub down")

    recorder = Recorder(Broken(), flush_interval_s=60)
    recorder.inc("steadyrank_ties_at_cutoff_total")
    assert recorder.flush() == 0 and recorder.failures == 1

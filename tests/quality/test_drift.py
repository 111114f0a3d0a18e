"""Golden drift's computations (serve.server.quality.drift) against brute force in numpy, and the
monitor's bounds (serve.server.quality.drift_monitor) with a stand-in embedding function (a fixed
lookup table of unit vectors: the monitor's job is sampling, bounding and bookkeeping, not the model)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from steadyrank.serve.server.quality.drift import (
    UNCOVERED,
    DriftReport,
    GoldenGeometry,
    nearest,
    nearest_other_distances,
    representatives,
    unit_rows,
)
from steadyrank.serve.server.quality.drift_monitor import DriftMonitor
from steadyrank.serve.server.quality.golden_sets import GoldenQuery, GoldenSet
from steadyrank.serve.settings.quality import QualitySettings


def _unit(rng: np.random.Generator, n: int, dim: int = 16) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _clustered(rng: np.random.Generator, centres: np.ndarray, n: int, noise: float = 0.15) -> np.ndarray:
    picks = centres[rng.integers(0, len(centres), n)]
    return unit_rows(picks + noise * rng.standard_normal(picks.shape).astype(np.float32))


def test_nearest_equals_brute_force():
    rng = np.random.default_rng(0)
    live, golden = _unit(rng, 300), _unit(rng, 57)
    distance, index = nearest(live, golden)
    brute = 1 - live.astype(np.float64) @ golden.T.astype(np.float64)
    np.testing.assert_array_equal(index, brute.argmin(axis=1))
    np.testing.assert_allclose(distance, brute.min(axis=1), atol=2e-6)


def test_nearest_other_equals_brute_force_with_duplicates():
    rng = np.random.default_rng(1)
    golden = _unit(rng, 40)
    golden = np.concatenate([golden, golden[:3]])  # three exact duplicates: their nearest other is at 0
    brute = 1 - golden.astype(np.float64) @ golden.T.astype(np.float64)
    np.fill_diagonal(brute, np.inf)
    np.testing.assert_allclose(nearest_other_distances(golden), brute.min(axis=1), atol=2e-6)
    assert np.all(nearest_other_distances(golden)[[0, 1, 2, 40, 41, 42]] < 1e-6)


def test_geometry_spread_topics_and_report_equal_brute_force():
    rng = np.random.default_rng(2)
    centres = _unit(rng, 4)
    golden = _clustered(rng, centres, 80)
    geometry = GoldenGeometry.build(golden, clusters=4, quantile=0.95, seed=0)
    g64 = golden.astype(np.float64)
    other = 1 - g64 @ g64.T
    np.fill_diagonal(other, np.inf)
    assert geometry.spread == pytest.approx(np.quantile(other.min(axis=1), 0.95), abs=2e-6)
    c64 = geometry.centroids.astype(np.float64)
    np.testing.assert_allclose(np.linalg.norm(c64, axis=1), 1, atol=1e-5)
    golden_labels = (g64 @ c64.T).argmax(axis=1)
    np.testing.assert_allclose(geometry.golden_shares, np.bincount(golden_labels, minlength=4) / 80)

    # live traffic: half on the golden topics, half on a new one
    live = np.concatenate([_clustered(rng, centres, 100), _clustered(rng, _unit(rng, 1), 100)])
    distances, topics = geometry.place(live)
    l64 = live.astype(np.float64)
    brute_d = (1 - l64 @ g64.T).min(axis=1)
    np.testing.assert_allclose(distances, brute_d, atol=2e-6)
    brute_topic = np.where(brute_d > geometry.spread, -1, (l64 @ c64.T).argmax(axis=1))
    np.testing.assert_array_equal(topics, brute_topic)

    report = DriftReport.measure(geometry, distances, topics)
    beyond = np.mean(brute_d > geometry.spread)
    assert report.beyond_share == pytest.approx(beyond)
    assert report.live_shares[UNCOVERED] == pytest.approx(beyond)
    assert sum(report.live_shares.values()) == pytest.approx(1.0)
    live_c = np.array([np.mean(brute_topic == c) for c in range(4)])
    assert report.topic_distance == pytest.approx(0.5 * (np.abs(live_c - geometry.golden_shares).sum() + beyond))
    assert report.distance_p95 == pytest.approx(np.quantile(brute_d, 0.95), abs=2e-6)
    assert 0.4 <= report.beyond_share <= 0.6  # the off-topic half is beyond the spread, the on-topic half within


def test_traffic_like_the_golden_set_is_about_five_percent_beyond():
    """Held-out traffic from the golden queries' own distribution: B ≈ 1 − quantile (module docstring)."""
    rng = np.random.default_rng(3)
    centres = _unit(rng, 6, dim=8)
    geometry = GoldenGeometry.build(_clustered(rng, centres, 400, 0.3), clusters=6, quantile=0.95, seed=0)
    report = DriftReport.measure(geometry, *geometry.place(_clustered(rng, centres, 4000, 0.3)))
    assert 0.02 <= report.beyond_share <= 0.10
    assert report.topic_distance < 0.15


def test_representatives_are_cluster_medoids_by_size():
    rng = np.random.default_rng(4)
    centres = _unit(rng, 3)
    sizes = [30, 20, 10]
    x = np.concatenate([_clustered(rng, centres[i:i + 1], s, 0.05) for i, s in enumerate(sizes)])
    picks = representatives(x, 3, seed=0)
    assert [size for _, size in picks] == sizes
    for (row, _), start, size in zip(picks, (0, 30, 50), sizes, strict=True):
        members = x[start:start + size].astype(np.float64)
        centroid = members.mean(axis=0)
        centroid /= np.linalg.norm(centroid)
        assert row == start + int(np.argmax(members @ centroid))


def _golden_set(n: int) -> GoldenSet:
    return GoldenSet({f"g{i}": GoldenQuery(f"g{i}", f"golden {i}", {"d": 5}) for i in range(n)})


class _Recorder:
    def __init__(self) -> None:
        self.gauges: dict[tuple, float] = {}
        self.counters: dict[tuple, float] = {}

    def inc(self, name: str, value: float = 1.0, **labels: str) -> None:
        key = (name, tuple(sorted(labels.items())))
        self.counters[key] = self.counters.get(key, 0.0) + value

    def set(self, name: str, value: float, **labels: str) -> None:
        self.gauges[(name, tuple(sorted(labels.items())))] = value


def test_monitor_bounds_pending_and_window_and_keeps_no_text_by_default():
    rng = np.random.default_rng(5)
    table = {f"golden {i}": v for i, v in enumerate(_unit(rng, 20))}
    calls: list[int] = []

    async def embed(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return np.stack([table.get(t, table["golden 0"]) for t in texts])

    settings = QualitySettings.model_validate({"drift": {"sample_fraction": 1.0, "max_pending": 25, "window": 10,
                                                         "batch_size": 8, "min_samples": 10}})
    recorder = _Recorder()
    monitor = DriftMonitor(settings, _golden_set(20), embed, recorder)
    for i in range(100):
        monitor.offer(f"golden {i % 20}")
    assert len(monitor.pending) == 25 and monitor.counts["dropped"] == 75  # limit before work
    report = asyncio.run(monitor.round())
    assert max(calls) <= 8 and len(monitor.window) == 10 and not monitor.pending
    assert report is not None and report.beyond_share == 0.0 and report.distance_mean < 1e-5
    assert all(s.text is None and s.vector is None for s in monitor.window)
    assert recorder.counters[("steadyrank_golden_drift_samples_total", (("outcome", "dropped"),))] == 75
    assert recorder.gauges[("steadyrank_golden_drift_beyond_ratio", ())] == 0.0
    proposals = asyncio.run(monitor.proposals())
    assert proposals["proposals"] == [] and "quality.log_queries is off" in proposals["reason"]

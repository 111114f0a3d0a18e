"""Live Δ-margin probes of the shadow evaluator: the gauges they export, and the alert rule's
expression evaluated by a real Prometheus scraping them.

The reranker variants are the bundled all-MiniLM-L6-v2 scored in process in FP32 (a real model; the
Ray deployment path is the Searcher's ``probe_keys``, a loop over ``reranker.score``). The
"canary" sees every candidate with its author masked: a stand-in for a model swap that lost the
name signal, which cannot be downloaded here.
"""

from __future__ import annotations

import asyncio
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import yaml

from steadyrank.serve.server.quality.probes import LiveProbes
from steadyrank.serve.settings.quality import ProbeSettings
from steadyrank.serve.telemetry import MetricsStore, Recorder
from steadyrank.serve.tools.probes.ablations import ablate
from steadyrank.serve.tools.probes.bundles import default_templates
from tests.prometheus_server import PrometheusServer
from tests.tiers import integration_fixture

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
@integration_fixture
def minilm():
    from steadyrank.serve.runtime import ModelSettings, load_scorer

    return load_scorer(ModelSettings(path=None))


def variants(minilm, bundles):
    """primary: MiniLM FP32 keys; canary: the same model shown every candidate's author masked."""
    masked = {}
    for b in bundles:
        for base, blind in zip(ablate(b, "base", default_templates()).candidates,
                               ablate(b, "mask", default_templates()).candidates, strict=True):
            masked[base] = blind

    def similarity(variant: str):
        async def keys(items):
            out = []
            for query, texts in items:
                texts = [masked.get(t, t) for t in texts] if variant == "canary" else texts
                out.append(np.asarray(minilm.score([(query, t) for t in texts]).keys, dtype=np.float32))
            return out
        return keys

    return similarity


def test_a_round_exports_every_margin_per_ablation_and_variant(minilm):
    store = MetricsStore()
    recorder = Recorder(store)
    settings = ProbeSettings(enabled=True, queries=4, ablations=["mask", "initials"], floor_name=0.05)
    probes = LiveProbes(settings, lambda v: None, recorder, ("primary", "canary"))
    probes.similarity = variants(minilm, probes.bundles)
    result = asyncio.run(probes.round())
    recorder.flush()
    text = store.render().decode()
    assert set(result) == {"primary", "canary"} and set(result["primary"]) == {"base", "mask", "initials"}
    assert result["primary"]["base"]["name"] > 0.02          # MiniLM tells the author from impostors
    assert result["primary"]["mask"]["name"] == 0.0          # masked: C1 and the impostors are one text
    assert result["canary"]["base"]["name"] == 0.0           # the name-blind canary
    value = result["primary"]["base"]["name"]
    assert f'steadyrank_probe_margin{{ablation="base",probe="name",variant="primary"}} {value!r}' in text \
        or f'steadyrank_probe_margin{{ablation="base",probe="name",variant="primary"}} {value}' in text
    assert 'steadyrank_probe_margin_floor{probe="name"} 0.05' in text


def _serve(store: MetricsStore) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            body = store.render()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def selected(prom: PrometheusServer, expr: str) -> set[tuple[str, str]]:
    return {(s["metric"]["variant"], s["metric"]["probe"]) for s in prom.query(expr)}


def expected(primary: dict[str, float], canary: dict[str, float], floor: float = 0.0) -> set[tuple[str, str]]:
    """What the alert selects (rules.yml): any variant's base margin below the floor, or the primary's below the canary's."""
    below = {(v, p) for v, margins in (("primary", primary), ("canary", canary)) for p in ("name", "topic") if margins[p] < floor}
    return below | {("primary", p) for p in ("name", "topic") if primary[p] < canary[p]}


@pytest.mark.prometheus
@pytest.mark.e2e
def test_prometheus_scrapes_the_probe_gauges_and_the_alert_expression_selects_the_eroded_margins(minilm, tmp_path):
    import time

    store = MetricsStore()
    recorder = Recorder(store)
    settings = ProbeSettings(enabled=True, queries=3, ablations=["mask"], floor_name=0.0, floor_topic=0.0)
    probes = LiveProbes(settings, lambda v: None, recorder, ("primary", "canary"))
    probes.similarity = variants(minilm, probes.bundles)
    result = asyncio.run(probes.round())
    recorder.flush()
    rule = next(r for g in yaml.safe_load((ROOT / "deploy/prometheus/rules.yml").read_text())["groups"]
                for r in g["rules"] if r.get("alert") == "SteadyrankProbeMarginEroded")
    server = _serve(store)
    try:
        with PrometheusServer(tmp_path, [f"127.0.0.1:{server.server_address[1]}"]) as prom:
            deadline = time.monotonic() + 30
            while not prom.query('steadyrank_probe_margin{ablation="base"}') and time.monotonic() < deadline:
                time.sleep(0.5)
            scraped = {(s["metric"]["variant"], s["metric"]["probe"]): float(s["value"][1])
                       for s in prom.query('steadyrank_probe_margin{ablation="base"}')}
            assert scraped[("primary", "name")] == pytest.approx(result["primary"]["base"]["name"])
            assert scraped[("canary", "name")] == 0.0
            assert selected(prom, rule["expr"]) == expected(result["primary"]["base"], result["canary"]["base"])
            assert ("primary", "name") not in selected(prom, rule["expr"])  # the primary holds names better
            # the primary loses names (its base Δname drops below the floor 0): the expression selects it
            recorder.set("steadyrank_probe_margin", -0.01, probe="name", ablation="base", variant="primary")
            recorder.flush()
            deadline = time.monotonic() + 30
            while ("primary", "name") not in (found := selected(prom, rule["expr"])) and time.monotonic() < deadline:
                time.sleep(0.5)
            primary = {**result["primary"]["base"], "name": -0.01}
            assert found == expected(primary, result["canary"]["base"])
    finally:
        server.shutdown()
        recorder.close()


def test_a_failing_round_is_counted_and_the_loop_goes_on():
    """The reranker fails the first two rounds, then answers (keys = candidate positions, reversed)."""
    calls = []

    def similarity(variant: str):
        async def flaky(items):
            calls.append(variant)
            if len(calls) <= 2:
                raise ConnectionError("reranker down")
            return [np.arange(len(texts), 0, -1, dtype=np.float32) for _, texts in items]
        return flaky

    store = MetricsStore()
    recorder = Recorder(store)
    probes = LiveProbes(ProbeSettings(enabled=True, queries=1, languages=["en"], interval_s=0.01), similarity,
                        recorder, ("primary",))

    async def until_a_success():
        task = asyncio.create_task(probes.run_forever())
        while probes.rounds < 1:
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(asyncio.wait_for(until_a_success(), 30))
    recorder.flush()
    text = store.render().decode()
    assert probes.failures == 2 and probes.rounds >= 1
    assert 'steadyrank_probe_rounds_total{outcome="failed"} 2.0' in text
    assert 'steadyrank_probe_rounds_total{outcome="ok"}' in text

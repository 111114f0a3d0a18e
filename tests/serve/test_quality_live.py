"""Online quality on the real application: shadow replays, golden series, and a real Prometheus.

The Prometheus test installs nothing itself: `make test` (and so CI) installs Debian's
`prometheus` package. It starts the real server on loopback, scraping the running steadyrank app
every second with the project's own alert rules, and checks through Prometheus' HTTP API that the
steadyrank request series and golden gauges arrive and that an alert fires when its condition
holds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.prometheus_server import PrometheusServer
from tests.serve.conftest import wait_until

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "rules.yml"


def _value(metrics: dict, name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in metrics.items() if n == name and labels.items() <= dict(ls).items())


def test_shadow_replays_are_not_user_traffic(serve_app, handle, metrics_text):
    before = metrics_text()
    evaluated = handle("ShadowEvaluator").replay_now.remote().result(timeout_s=300)
    assert evaluated >= 2  # sample_size 2 golden queries through primary and canary

    def replays_visible():
        now = metrics_text()
        return now if _value(now, "steadyrank_golden_evaluations_total", source="replay") > _value(
            before, "steadyrank_golden_evaluations_total", source="replay") else None

    after = wait_until(replays_visible, 20)
    assert after, "golden replay evaluations never reached /metrics"
    # the replays went through the Searcher, but no user /v1/search request was counted
    assert _value(after, "steadyrank_requests_total", endpoint="search") == _value(
        before, "steadyrank_requests_total", endpoint="search")
    assert _value(after, "steadyrank_golden_quality", variant="primary", metric="ndcg", k="10", stat="expected") > 0
    # window statistics as series; the replays' cross-encoder chunks (the canary's: the primary is the
    # embedder itself and scores from stored vectors, with no forward pass) went through the shadow gate
    assert _value(after, "steadyrank_golden_candidates_mean", variant="primary") >= 30
    assert any(n == "steadyrank_golden_escalation_ratio" for n, _ in after)
    assert any(n == "steadyrank_golden_ties_at_cutoff_ratio" for n, _ in after)
    assert _value(after, "steadyrank_shadow_wait_seconds_count", deployment="canary_reranker") > 0
    status = handle("ShadowEvaluator").status.remote().result(timeout_s=60)
    assert status["golden_queries"] == 40 and status["variants"] == ["primary", "canary"]


def test_shadow_scores_equal_user_scores(serve_app, handle):
    """Chunked shadow scoring (admission.shadow_chunk_docs) gives the user path's FP32 scores."""
    import numpy as np

    from steadyrank.retrieval.corpus import read_documents
    from steadyrank.serve.server.default import DEMO_CORPUS

    docs = [d.full_text for d in read_documents(DEMO_CORPUS)][:11]
    query = "how do I restart a systemd service"
    reranker = handle("Reranker")
    user = reranker.score.remote(query, docs).result(timeout_s=120)
    shadow = reranker.score.remote(query, docs, shadow=True).result(timeout_s=120)
    np.testing.assert_allclose(shadow.scores, user.scores, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(shadow.truncated, user.truncated)


def test_golden_query_header_is_mirrored_only_for_its_own_query(serve_app, client, handle):
    """X-Golden-Query-Id names the golden query a search is evaluated against only when the search is
    that query (its normalised text); another query's header is ignored (issue 31, finding 8: without
    an admin key, a client must not score unrelated searches against golden judgments)."""
    def status() -> dict:
        return handle("ShadowEvaluator").status.remote().result(timeout_s=60)

    before = status()
    response = client.post("/v1/search", json={"query": "anything at all", "top_n": 5},
                           headers={"X-Golden-Query-Id": "q01"})
    assert response.status_code == 200
    ignored = wait_until(lambda: status()["golden_id_ignored"] > before["golden_id_ignored"], 30)
    assert ignored, "a search of another query was evaluated against q01's judgments"
    own = "How do I make a systemd service restart automatically when it crashes?"
    response = client.post("/v1/search", json={"query": own, "top_n": 5}, headers={"X-Golden-Query-Id": "q01"})
    assert response.status_code == 200
    mirrored = wait_until(lambda: status()["mirrored"] > before["mirrored"], 30)
    assert mirrored, "a search of q01 carrying X-Golden-Query-Id was not evaluated"


def test_canary_report_endpoint_and_cli(serve_app, client):
    report = client.get("/v1/canary").json()
    assert report["verdict"] in ("promote", "hold", "rollback")
    assert "ndcg@10" in report["metrics"] or report["paired_queries"] == 0
    out = subprocess.run([sys.executable, "-m", "steadyrank.serve.cli", "canary", "report",
                          "--url", serve_app.url, "--api-key", serve_app.api_key],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"verdict: {report['verdict']}") or out.stdout.startswith("verdict: ")




def _firing_rules(tmp_path: Path) -> Path:
    """deploy/prometheus/rules.yml with SteadyrankGoldenRaNWGLow made to fire at once.

    Its real expression is kept; only the floor (1.01, above any RA-nWG) and ``for`` change.
    """
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == "SteadyrankGoldenRaNWGLow":
                assert "< 0.5" in rule["expr"]
                rule["expr"] = rule["expr"].replace("< 0.5", "< 1.01")
                rule["for"] = "0s"
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump(rules))
    return path


@pytest.mark.prometheus
def test_real_prometheus_scrapes_series_and_fires_an_alert(serve_app, client, handle, tmp_path):
    target = serve_app.url.removeprefix("http://")
    with PrometheusServer(tmp_path, [target], [_firing_rules(tmp_path)]) as prometheus:
        assert client.post("/v1/search", json={"query": "how do I list open ports", "top_n": 3}).status_code == 200
        handle("ShadowEvaluator").replay_now.remote().result(timeout_s=300)
        query = prometheus.query

        assert wait_until(lambda: query('steadyrank_requests_total{endpoint="search"}'), 60), "request series missing"
        golden = wait_until(lambda: query('steadyrank_golden_quality{variant="primary",metric="ndcg",k="10"}'), 60)
        assert {series["metric"]["stat"] for series in golden} >= {"expected", "min", "max", "range", "bias", "oblivious"}
        assert wait_until(lambda: query("steadyrank_golden_proc_ratio"), 30), "PROC ratio series missing"

        def firing() -> list:
            alerts = prometheus.get("/api/v1/alerts")["data"]["alerts"]
            return [a for a in alerts if a["labels"]["alertname"] == "SteadyrankGoldenRaNWGLow" and a["state"] == "firing"]

        assert wait_until(firing, 60), "SteadyrankGoldenRaNWGLow did not fire"
        rules = prometheus.get("/api/v1/rules")["data"]["groups"]
        assert all(rule["health"] in ("ok", "unknown") for group in rules for rule in group["rules"])


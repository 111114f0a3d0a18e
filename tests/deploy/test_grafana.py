"""The Grafana dashboard and the Prometheus rules speak only the metric contract.

Every PromQL expression in deploy/grafana/steadyrank.json (panel targets and template
variable queries) and in deploy/prometheus/rules.yml may reference only the metric names
the application exports (CONTRACT below, the list deploy/README.md documents) or the
recording rules rules.yml defines. A typo in a metric name would otherwise show up as an
empty panel or an alert that can never fire.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "steadyrank.json"
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"

# name -> type, exactly as the application exports them.
CONTRACT = {
    "steadyrank_requests_total": "counter",
    "steadyrank_requests_dropped_total": "counter",
    "steadyrank_request_retries_total": "counter",
    "steadyrank_request_duration_seconds": "histogram",
    "steadyrank_in_flight_requests": "gauge",
    "steadyrank_queued_work_units": "gauge",
    "steadyrank_stage_duration_seconds": "histogram",
    "steadyrank_batch_size": "histogram",
    "steadyrank_candidates_reranked": "histogram",
    "steadyrank_route_decisions_total": "counter",
    "steadyrank_escalations_total": "counter",
    "steadyrank_tie_group_size_at_cutoff": "histogram",
    "steadyrank_ties_at_cutoff_total": "counter",
    "steadyrank_rescored_ties_total": "counter",
    "steadyrank_golden_quality": "gauge",
    "steadyrank_golden_proc": "gauge",
    "steadyrank_golden_proc_ratio": "gauge",
    "steadyrank_golden_evaluations_total": "counter",
    "steadyrank_golden_failures_total": "counter",
    "steadyrank_golden_last_success_timestamp_seconds": "gauge",
    "steadyrank_golden_ties_at_cutoff_ratio": "gauge",
    "steadyrank_golden_tie_group_size_mean": "gauge",
    "steadyrank_golden_escalation_ratio": "gauge",
    "steadyrank_golden_candidates_mean": "gauge",
    "steadyrank_golden_latency_seconds": "gauge",
    "steadyrank_shadow_wait_seconds": "histogram",
    "steadyrank_canary_delta": "gauge",
    "steadyrank_canary_verdict": "gauge",
    "steadyrank_probe_margin": "gauge",
    "steadyrank_probe_margin_floor": "gauge",
    "steadyrank_probe_rounds_total": "counter",
    "steadyrank_partial_searches_total": "counter",
    "steadyrank_deployment_replicas": "gauge",
    "steadyrank_live_judged_samples_total": "counter",
    "steadyrank_live_judged_quality": "gauge",
    "steadyrank_live_judged_quality_floor": "gauge",
    "steadyrank_live_judged_window_samples": "gauge",
    "steadyrank_live_judged_judge_calls_total": "counter",
    "steadyrank_live_judged_tokens_total": "counter",
    "steadyrank_live_judged_budget_used_ratio": "gauge",
    "steadyrank_live_judged_queue_depth": "gauge",
    "steadyrank_golden_drift_distance": "gauge",
    "steadyrank_golden_drift_beyond_ratio": "gauge",
    "steadyrank_golden_drift_spread": "gauge",
    "steadyrank_golden_drift_topic_share": "gauge",
    "steadyrank_golden_drift_topic_distance": "gauge",
    "steadyrank_golden_drift_window_queries": "gauge",
    "steadyrank_golden_drift_samples_total": "counter",
    "steadyrank_segment_requests_total": "counter",
    "steadyrank_segment_canary_verdict": "gauge",
    "steadyrank_segment_pvalue": "gauge",
    "steadyrank_segment_paired_queries": "gauge",
    "steadyrank_segment_guard_active": "gauge",
    "steadyrank_segment_guard_changes_total": "counter",
    "steadyrank_cutoff_checks_total": "counter",
    "steadyrank_cutoff_uncertified_total": "counter",
    "steadyrank_cutoff_rescored_total": "counter",
}


def exported_series_names() -> set[str]:
    names = set()
    for name, kind in CONTRACT.items():
        if kind == "histogram":
            names.update(f"{name}{suffix}" for suffix in ("_bucket", "_sum", "_count"))
        else:
            names.add(name)
    return names


def recording_rule_names() -> set[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {rule["record"] for group in groups for rule in group["rules"] if "record" in rule}


PROMQL_WORDS = {
    # aggregation operators and their modifiers
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
    "bottomk", "topk", "quantile", "limitk", "limit_ratio",
    "by", "without", "on", "ignoring", "group_left", "group_right",
    # binary and set operators, modifiers, literals
    "and", "or", "unless", "bool", "offset", "atan2", "inf", "nan",
}


def metric_names(expr: str) -> set[str]:
    """Metric names referenced by a PromQL expression (Grafana variables allowed)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals (label values, regexes)
    e = re.sub(r"'(?:[^'\\]|\\.)*'", "''", e)
    e = re.sub(r"`[^`]*`", "``", e)
    e = re.sub(r"\{[^{}]*\}", "", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)  # range and subquery windows ([5m], [$__rate_interval])
    e = re.sub(r"\$\{?\w+(?::\w+)?\}?", "", e)  # any other Grafana variable
    e = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", e):
        word = m.group(0)
        if word.lower() in PROMQL_WORDS:
            continue
        if re.match(r"\s*\(", e[m.end():]):  # a function call: rate(, histogram_quantile(, time(
            continue
        names.add(word)
    return names


def test_metric_name_extraction() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (le, endpoint) (rate(steadyrank_request_duration_seconds_bucket'
        '{job=~"$job", endpoint=~"a|b"}[$__rate_interval]))) / on (job) group_left '
        "sum without (x) (job:foo:rate5m offset 5m) > 1e3 or vector(0) and time() - up"
    )
    assert metric_names(expr) == {"steadyrank_request_duration_seconds_bucket", "job:foo:rate5m", "up"}


def load_dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def all_panels(dashboard: dict) -> list[dict]:
    panels = []
    for panel in dashboard["panels"]:
        panels.append(panel)
        panels.extend(panel.get("panels", []))  # collapsed rows keep their panels inside
    return panels


def panel_expressions(dashboard: dict) -> list[tuple[str, str]]:
    return [
        (panel["title"], target["expr"])
        for panel in all_panels(dashboard)
        for target in panel.get("targets", [])
    ]


def test_dashboard_structure() -> None:
    dashboard = load_dashboard()
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [panel["id"] for panel in all_panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in all_panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel.get("targets"), f"panel {panel['title']!r} has no query"
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        for target in panel["targets"]:
            assert target["expr"].strip(), f"empty expression in {panel['title']!r}"
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), f"duplicate refId in {panel['title']!r}"
        assert {"h", "w", "x", "y"} <= panel["gridPos"].keys()


def test_dashboard_references_only_contract_metrics() -> None:
    allowed = exported_series_names() | recording_rule_names()
    dashboard = load_dashboard()
    expressions = panel_expressions(dashboard)
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
            m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", query.strip())
            assert m, f"variable {variable['name']}: unexpected query {query!r}"
            expressions.append((f"variable {variable['name']}", m.group(1)))
    unknown = {
        (where, name)
        for where, expr in expressions
        for name in metric_names(expr)
        if name not in allowed
    }
    assert not unknown, f"names outside the metric contract and recording rules: {sorted(unknown)}"


def test_dashboard_shows_every_contract_metric() -> None:
    """Each exported metric is on some panel, directly or through a recording rule."""
    groups = yaml.safe_load(RULES.read_text())["groups"]
    recorded_from = {
        rule["record"]: metric_names(rule["expr"])
        for group in groups
        for rule in group["rules"]
        if "record" in rule
    }
    referenced = set()
    for _, expr in panel_expressions(load_dashboard()):
        for name in metric_names(expr):
            referenced |= recorded_from.get(name, {name})
    shown = {n if n in CONTRACT else re.sub(r"_(bucket|sum|count)$", "", n) for n in referenced}
    missing = set(CONTRACT) - shown
    assert not missing, f"contract metrics no panel shows: {sorted(missing)}"


def test_rules_reference_only_contract_metrics() -> None:
    allowed = exported_series_names() | recording_rule_names()
    groups = yaml.safe_load(RULES.read_text())["groups"]
    unknown = {
        (rule.get("record") or rule.get("alert"), name)
        for group in groups
        for rule in group["rules"]
        for name in metric_names(rule["expr"])
        if name not in allowed
    }
    assert not unknown, f"names outside the metric contract and recording rules: {sorted(unknown)}"

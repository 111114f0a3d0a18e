"""deploy/prometheus: the scrape config and the rules pass promtool, and every alert is tested.

promtool ships in Debian's `prometheus` package, which `make test` installs; without it the
promtool tests are skipped (the coverage checks below still run).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
PROM_DIR = ROOT / "deploy" / "prometheus"
CONFIG = PROM_DIR / "prometheus.yml"
RULES = PROM_DIR / "rules.yml"
RULES_TEST = PROM_DIR / "rules_test.yml"

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is not on PATH (Debian package `prometheus`; `make test` installs it)",
)


@pytest.mark.prometheus
@needs_promtool
@pytest.mark.parametrize(
    "args",
    [
        ["check", "config", str(CONFIG)],
        ["check", "rules", str(RULES)],
        ["test", "rules", str(RULES_TEST)],
    ],
    ids=["check-config", "check-rules", "test-rules"],
)
@pytest.mark.e2e
def test_promtool(args: list[str]) -> None:
    # cwd elsewhere on purpose: rule file paths must resolve relative to the files themselves.
    proc = subprocess.run(
        [PROMTOOL, *args], cwd=ROOT / "tests", capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"promtool {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    assert "SUCCESS" in proc.stdout + proc.stderr


def load_rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def load_rule_tests() -> dict:
    return yaml.safe_load(RULES_TEST.read_text())


def test_config_loads_the_rules_file() -> None:
    config = yaml.safe_load(CONFIG.read_text())
    assert [(CONFIG.parent / f).resolve() for f in config["rule_files"]] == [RULES.resolve()]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs["steadyrank"]["metrics_path"] == "/metrics"
    targets = [t for sc in jobs["steadyrank"]["static_configs"] for t in sc["targets"]]
    assert targets == ["127.0.0.1:8000"]


def test_rules_test_file_loads_the_rules_file() -> None:
    rule_files = load_rule_tests()["rule_files"]
    assert [(RULES_TEST.parent / f).resolve() for f in rule_files] == [RULES.resolve()]


def test_every_alert_is_tested_firing_and_silent() -> None:
    alerts = {rule["alert"] for rule in load_rules() if "alert" in rule}
    assert alerts, "rules.yml defines no alerts"
    firing, silent = set(), set()
    for case in load_rule_tests()["tests"]:
        for check in case.get("alert_rule_test", []):
            (firing if check.get("exp_alerts") else silent).add(check["alertname"])
    assert not (firing | silent) - alerts, f"tests name unknown alerts: {sorted((firing | silent) - alerts)}"
    assert not alerts - firing, f"alerts never tested firing: {sorted(alerts - firing)}"
    assert not alerts - silent, f"alerts never tested silent: {sorted(alerts - silent)}"


def test_every_recording_rule_is_tested() -> None:
    records = {rule["record"] for rule in load_rules() if "record" in rule}
    exprs = [
        check["expr"]
        for case in load_rule_tests()["tests"]
        for check in case.get("promql_expr_test", [])
    ]
    untested = {r for r in records if not any(r in e for e in exprs)}
    assert not untested, f"recording rules without a promql_expr_test: {sorted(untested)}"


def test_alerts_carry_severity_annotations_and_for() -> None:
    for rule in load_rules():
        if "alert" not in rule:
            continue
        name = rule["alert"]
        assert rule.get("labels", {}).get("severity") in {"warning", "critical"}, name
        assert rule.get("annotations", {}).get("summary"), name
        assert rule.get("annotations", {}).get("description"), name
        assert rule.get("for"), f"{name} has no `for:` and would fire on a single evaluation"

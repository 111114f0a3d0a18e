"""The Ray Serve tuning `steadyrank serve` applies (serve.app.ray_env) and its copy for `serve deploy`."""

from __future__ import annotations

from pathlib import Path

import yaml

from steadyrank.serve.app.ray_env import NOT_READ_BY_REPLICAS, RAY_ENV_DEFAULTS, apply_ray_env, replica_env

ROOT = Path(__file__).resolve().parents[2]


def test_apply_sets_what_is_missing_and_keeps_what_the_user_exported() -> None:
    name = "RAY_SERVE_METRICS_EXPORT_INTERVAL_MS"
    environ = {name: "250", "UNRELATED": "x"}
    in_force = apply_ray_env(environ)
    assert in_force[name] == "250" and environ[name] == "250"
    for other, value in RAY_ENV_DEFAULTS.items():
        if other != name:
            assert environ[other] == value == in_force[other]
    assert environ["UNRELATED"] == "x"


def test_serve_config_carries_every_replica_variable() -> None:
    """`serve deploy deploy/serve_config.yaml` runs replicas with the same tuning as `steadyrank serve`."""
    config = yaml.safe_load((ROOT / "deploy" / "serve_config.yaml").read_text())
    (app,) = config["applications"]
    assert app["runtime_env"]["env_vars"] == replica_env()
    assert not NOT_READ_BY_REPLICAS & set(app["runtime_env"]["env_vars"])
    assert app["logging_config"]["enable_access_log"] is False


def test_kuberay_nodes_start_workers_at_the_niceness_steadyrank_serve_uses() -> None:
    """The raylet reads ``RAY_worker_niceness`` when it starts: every node's container carries it."""
    service = yaml.safe_load((ROOT / "deploy" / "kuberay" / "rayservice.yaml").read_text())
    cluster = service["spec"]["rayClusterConfig"]
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    for group in groups:
        (container,) = group["template"]["spec"]["containers"]
        env = {e["name"]: e["value"] for e in container.get("env", [])}
        assert env.get("RAY_worker_niceness") == RAY_ENV_DEFAULTS["RAY_worker_niceness"], group.get("groupName", "head")

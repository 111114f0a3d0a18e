"""The Ray Serve tuning `steadyrank serve` applies (serve.launcher.ray_env) and its copy for `serve deploy`."""

from __future__ import annotations

from pathlib import Path

import yaml

from steadyrank.serve.launcher.ray_env import (
    HAPROXY_ENV_DEFAULTS,
    HAPROXY_FILE_VARIABLES,
    HAPROXY_PORT_VARIABLES,
    NODE_VARIABLES,
    NOT_READ_BY_REPLICAS,
    RAY_ENV_DEFAULTS,
    apply_haproxy_env,
    apply_ray_env,
    node_env,
    replica_env,
)

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


def test_haproxy_ingress_takes_a_port_per_side_listener_and_keeps_what_the_user_exported() -> None:
    ports = iter(range(41000, 41100))
    environ = {"RAY_SERVE_HAPROXY_STATS_PORT": "9999", "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "7",
               "RAY_SERVE_HAPROXY_SOCKET_PATH": "/run/mine.sock"}
    in_force = apply_haproxy_env(lambda: next(ports), Path("/tmp/srv-1"), environ)
    assert environ["RAY_SERVE_ENABLE_HA_PROXY"] == HAPROXY_ENV_DEFAULTS["RAY_SERVE_ENABLE_HA_PROXY"] == "1"
    assert environ["RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S"] == "7"
    assert environ["RAY_SERVE_HAPROXY_STATS_PORT"] == "9999"
    picked = [environ[name] for name in HAPROXY_PORT_VARIABLES if name != "RAY_SERVE_HAPROXY_STATS_PORT"]
    assert picked == ["41000", "41001", "41002"]
    assert environ["RAY_SERVE_HAPROXY_CONFIG_FILE_LOC"] == "/tmp/srv-1/haproxy.cfg"  # the server's own folder
    assert environ["RAY_SERVE_HAPROXY_SERVER_STATE_FILE"] == "/tmp/srv-1/state/server-state"
    assert environ["RAY_SERVE_HAPROXY_SOCKET_PATH"] == "/run/mine.sock"
    assert in_force == {name: environ[name] for name in (*HAPROXY_ENV_DEFAULTS, *HAPROXY_PORT_VARIABLES,
                                                         *HAPROXY_FILE_VARIABLES)}


def test_serve_config_carries_every_replica_variable() -> None:
    """`serve deploy deploy/serve_config.yaml` runs replicas with the same tuning as `steadyrank serve`."""
    config = yaml.safe_load((ROOT / "deploy" / "serve_config.yaml").read_text())
    (app,) = config["applications"]
    assert app["runtime_env"]["env_vars"] == replica_env()
    assert not NOT_READ_BY_REPLICAS & set(app["runtime_env"]["env_vars"])
    assert app["logging_config"]["enable_access_log"] is False


def test_kuberay_nodes_carry_the_node_variables_steadyrank_serve_sets() -> None:
    """The raylet reads ``RAY_worker_niceness`` and each node's Serve proxy its error callback when
    they start: every node's container carries :func:`node_env`."""
    docs = yaml.safe_load_all((ROOT / "deploy" / "kuberay" / "rayservice.yaml").read_text())
    service = next(d for d in docs if d and d["kind"] == "RayService")
    cluster = service["spec"]["rayClusterConfig"]
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    for group in groups:
        (container,) = group["template"]["spec"]["containers"]
        env = {e["name"]: e["value"] for e in container.get("env", [])}
        assert node_env().items() <= env.items(), group.get("groupName", "head")


def test_node_env_is_what_a_node_reads_and_its_proxy_callback_resolves() -> None:
    """The node variables are left out of an application's runtime_env, and the proxy callback is
    what Ray Serve's proxy accepts: called and checked the way the proxy does it."""
    from ray.serve._private.http_util import validate_http_proxy_callback_return
    from ray.serve._private.utils import call_function_from_import_path

    from steadyrank.serve.server.hosting.proxy_errors import ProxyErrors

    assert set(node_env()) == NODE_VARIABLES <= NOT_READ_BY_REPLICAS
    assert node_env()["RAY_worker_niceness"] == RAY_ENV_DEFAULTS["RAY_worker_niceness"]
    callback = node_env()["RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"]
    middlewares = validate_http_proxy_callback_return(call_function_from_import_path(callback))
    assert [m.cls for m in middlewares] == [ProxyErrors]

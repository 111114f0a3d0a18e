"""HAProxy's side listeners on loopback (serve/launcher/haproxy_listeners.py), and Ray's own processes on
loopback (serve/launcher/ray_env.py ``apply_local_head_env``).

The configuration is Ray Serve's own template, rendered the way its HAProxy manager renders it; the
wrapper runs as Ray runs HAProxy, with a stand-in for the HAProxy binary that prints what it was
given (a real HAProxy would start listening). The served check, ``ss -ltnp`` of a whole server, is
``tests/serve/test_lifecycle.py::test_stop_drains_and_leaves_nothing`` (``SIGTERM-colocated`` and
``SIGINT-split``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from ray.serve._private.haproxy import HAProxyConfig, _haproxy_fmt_literal
from ray.serve._private.haproxy_templates import HAPROXY_CONFIG_TEMPLATE
from ray.serve.config import HTTPOptions

from steadyrank.serve.launcher.haproxy_listeners import BINARY_VARIABLE, install, loopback_binds
from steadyrank.serve.launcher.ray_env import LOCAL_HEAD_ENV

STATS, METRICS = 41404, 41101


def ray_config(host: str, port: int = 8000) -> str:
    """Ray Serve's HAProxy configuration for an HTTP front on ``host:port`` (no backends yet)."""
    from jinja2 import Environment

    env = Environment()
    env.filters["haproxy_fmt"] = _haproxy_fmt_literal
    config = HAProxyConfig(stats_port=STATS, metrics_port=METRICS, http_options=HTTPOptions(host=host, port=port))
    return env.from_string(HAPROXY_CONFIG_TEMPLATE).render(
        {"config": config, "backends": [], "grpc_backends": [], "backends_with_health_config": [],
         "grpc_backends_with_health_config": [], "healthz_rules": "", "grpc_healthz_rules": "", "route_info": None,
         "has_ingress_request_router": False, "metrics_enabled": config.metrics_enabled})


def binds(config: str) -> list[str]:
    return [line.split()[1] for line in config.splitlines() if line.strip().startswith("bind ")]


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_the_side_listeners_move_to_loopback_and_the_front_stays(host: str) -> None:
    config = ray_config(host)
    front = "127.0.0.1:8000" if host == "127.0.0.1" else "*:8000"
    assert sorted(binds(config)) == sorted([f"*:{STATS}", f":{METRICS}", front])  # Ray: every interface
    rewritten = loopback_binds(config, [STATS, METRICS])
    assert sorted(binds(rewritten)) == sorted([f"127.0.0.1:{STATS}", f"127.0.0.1:{METRICS}", front])
    assert [line for line in rewritten.splitlines() if "bind" not in line] == \
        [line for line in config.splitlines() if "bind" not in line]


@pytest.mark.e2e  # a process of its own
def test_the_wrapper_rewrites_the_file_then_becomes_haproxy_with_the_same_arguments(tmp_path: Path) -> None:
    """As Ray starts it: ``<binary> -db -f <config> -dR -sf <old pid>``."""
    fake = tmp_path / "haproxy"
    fake.write_text('#!/bin/sh\necho "pid $$ args $*"\ncat "$3"\n')
    fake.chmod(0o755)
    cfg = tmp_path / "node" / "haproxy.cfg"
    cfg.parent.mkdir()
    cfg.write_text(ray_config("0.0.0.0"))
    environ: dict[str, str] = {}
    wrapper = install(tmp_path, str(fake), environ)
    assert environ == {BINARY_VARIABLE: str(wrapper)}
    env = {**os.environ, "RAY_SERVE_HAPROXY_STATS_PORT": str(STATS), "RAY_SERVE_HAPROXY_METRICS_PORT": str(METRICS)}
    started = subprocess.Popen([str(wrapper), "-db", "-f", str(cfg), "-dR", "-sf", "123"], env=env,
                               stdout=subprocess.PIPE, text=True)
    out, _ = started.communicate(timeout=60)
    assert started.returncode == 0
    first, *config = out.splitlines()
    assert first == f"pid {started.pid} args -db -f {cfg} -dR -sf 123"  # exec: the pid Ray holds is HAProxy's
    assert sorted(binds("\n".join(config))) == sorted([f"127.0.0.1:{STATS}", f"127.0.0.1:{METRICS}", "*:8000"])
    assert cfg.read_text().splitlines() == config  # rewritten in place, for HAProxy and for the next reload


def _in_fresh_python(code: str) -> str:
    """``code``'s output in an interpreter that has not imported ray (this one has)."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@pytest.mark.e2e  # a process of its own
def test_a_local_head_runs_ray_in_its_single_machine_mode_on_127_0_0_1() -> None:
    """Set before ray is imported, the switch makes the node address Ray gives this machine 127.0.0.1."""
    out = _in_fresh_python(
        "import os\nfrom steadyrank.serve.launcher.ray_env import apply_local_head_env\n"
        "print(apply_local_head_env(os.environ))\n"
        "from ray._private.services import get_node_ip_address\nprint(get_node_ip_address())\n")
    assert out.splitlines() == [str(LOCAL_HEAD_ENV), "127.0.0.1"]
    assert LOCAL_HEAD_ENV == {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


@pytest.mark.e2e  # a process of its own
def test_ray_imported_before_the_switch_is_refused() -> None:
    """Ray reads the switch when it is imported: too late is an error, not a head on the network."""
    out = _in_fresh_python("import ray\nfrom steadyrank.serve.launcher.ray_env import apply_local_head_env\n"
                           "try:\n    apply_local_head_env({})\nexcept RuntimeError as e:\n    print('refused', e)\n")
    assert out.startswith("refused ray was imported before"), out

"""Closed by default against a running Ray Serve (serve/server/hosting/exposure.py): the refusal of a keyless
application when Serve listens on every interface, where Ray Serve builds it and where it runs.

One script in a fresh interpreter (its own local Ray in its own temp folder: the test session's Ray
Serve listens on 127.0.0.1, and one Serve per cluster has one address) starts Serve on ``0.0.0.0``
and then:

- runs the real ``serve run CONFIG --non-blocking`` against that cluster with a config of
  ``deploy/serve_config.yaml``'s shape: the Serve controller builds the application in a task of
  its own, as for ``serve deploy`` and KubeRay; the application must end ``DEPLOY_FAILED`` with the
  refusal in its status message, no replica started;
- deploys an application built *before* Serve was started (``build_app`` then saw the default
  address, 127.0.0.1, and let it through): its ``Ingress`` replica asks the controller for the real
  address as it starts and refuses, so the deployment fails instead of serving open.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
REFUSAL = "no API key is configured and the server would listen on '0.0.0.0' (Ray Serve's http_options.host)"

SCRIPT = r"""
import json, socket, subprocess, sys, time
from pathlib import Path
import ray
from ray import serve
from steadyrank.serve.server.hosting.builder import build_app

work, serve_cli = Path(sys.argv[1]), sys.argv[2]
settings = {"quality": {"enabled": False}, "cache_dir": str(work / "cache"),
            "deployments": {name: {"num_cpus": 0.1} for name in ("ingress", "searcher", "embedder", "reranker",
                                                                  "retriever", "metrics_hub")}}
(work / "settings.yaml").write_text(json.dumps(settings))
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
early = build_app({"settings": settings})  # no Serve yet: the address serve.start would use
sock = socket.socket(); sock.bind(("127.0.0.1", 0)); port = sock.getsockname()[1]; sock.close()
serve.start(http_options={"host": "0.0.0.0", "port": port})
config = json.loads(sys.argv[3])
config["http_options"]["port"] = port
config["applications"][0]["args"] = {"settings": str(work / "settings.yaml")}
(work / "serve_config.yaml").write_text(json.dumps(config))
out = {}
done = subprocess.run([serve_cli, "run", str(work / "serve_config.yaml"), "--non-blocking",
                       "--address", ray.get_runtime_context().gcs_address], capture_output=True, text=True,
                      timeout=300)
out["serve_run"] = done.returncode


def settled(app):
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        status = serve.status().applications.get(app)
        if status is not None and status.status in ("DEPLOY_FAILED", "RUNNING"):
            return status
        time.sleep(1)
    return serve.status().applications.get(app)


built = settled("steadyrank")
out["config_app"] = [built.status, built.message, sorted(built.deployments)]
try:
    serve.run(early, name="early", route_prefix="/early")
    out["early_app"] = ["RUNNING", ""]
except RuntimeError:
    early_status = serve.status().applications["early"]
    out["early_app"] = [early_status.status, early_status.deployments["Ingress"].message]
print("RESULT " + json.dumps(out), flush=True)
serve.shutdown()
ray.shutdown()
"""


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A folder under /tmp with a short path: Ray's unix socket paths under it must stay below 107 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="srx-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_keyless_app_on_every_interface_is_refused_where_serve_builds_it_and_where_it_runs(short_tmp: Path) -> None:
    config = yaml.safe_load((ROOT / "deploy" / "serve_config.yaml").read_text())
    config["http_options"] = {"host": "0.0.0.0", "port": 0}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "STEADYRANK_"))}
    env.update(RAY_TMPDIR=str(short_tmp / "ray"), RAY_USAGE_STATS_ENABLED="0")
    serve_cli = str(Path(sys.executable).parent / "serve")
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(short_tmp), serve_cli, json.dumps(config)], env=env,
                          capture_output=True, text=True, timeout=900, cwd=short_tmp)
    assert done.returncode == 0, done.stderr[-4000:]
    (result,) = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    out = json.loads(result.removeprefix("RESULT "))
    assert out["serve_run"] == 0
    status, message, deployments = out["config_app"]
    assert status == "DEPLOY_FAILED" and REFUSAL in message, out  # the controller's build task refused
    assert deployments == [], out  # nothing was deployed
    status, message = out["early_app"]
    assert status == "DEPLOY_FAILED" and REFUSAL in message, out  # the Ingress replica refused

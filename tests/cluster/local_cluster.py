"""A real two-node Ray cluster on this machine, isolated from every other Ray instance.

Each node is one ``<venv>/bin/ray start … --block`` process in its own session (process group),
with its own ``--temp-dir`` and explicitly chosen free ports (GCS, dashboard, agents, node and
object managers; workers take free ports of Ray's default range), so it can neither join nor disturb the test session's local
Ray or anyone else's. Stopping a node kills its process group (never ``ray stop``, which would
stop every Ray on the machine); the cluster's subprocesses get ``RAY_ADDRESS`` of this cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        socks.append(sock)
        ports.append(int(sock.getsockname()[1]))
    for sock in socks:
        sock.close()
    return ports


@dataclass
class Node:
    name: str
    process: subprocess.Popen
    log: Path

    def kill(self) -> None:
        """SIGKILL the node's whole process group (raylet, its workers, the agents)."""
        try:  # also when `ray start` itself exited: the raylet it spawned may live on in its group
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)


@dataclass
class LocalCluster:
    root: Path
    nodes: dict[str, Node] = field(default_factory=dict)
    #: short temp root: Ray's AF_UNIX socket paths under it must stay below 107 bytes
    temp_root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="sr-ray-", dir="/tmp")))
    gcs_port: int = 0
    dashboard_port: int = 0
    #: more environment of the nodes (Ray's own switches a test needs)
    node_env: dict[str, str] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    @property
    def dashboard(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    def env(self) -> dict[str, str]:
        """The environment of the nodes and of the drivers: this cluster's address, and what
        ``ray start`` on every node of a steadyrank cluster gets (:func:`serve.launcher.ray_env.node_env`,
        as deploy/kuberay sets it on each pod)."""
        from steadyrank.serve.launcher.ray_env import node_env

        env = dict(os.environ)
        env.update({"RAY_ADDRESS": self.address, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1",
                    "RAY_AUTH_MODE": "disabled", **node_env(), **self.node_env})
        return env

    def _start(self, name: str, args: list[str], num_cpus: int, resources: dict[str, float]) -> None:
        agent, grpc, runtime_env, metrics, node_mgr, obj_mgr = free_ports(6)
        temp = self.temp_root / name
        temp.mkdir(parents=True, exist_ok=True)
        log = self.root / f"{name}.log"
        command = [
            str(BIN / "ray"), "start", *args, "--block", "--temp-dir", str(temp),
            "--num-cpus", str(num_cpus), "--resources", json.dumps(resources),
            "--dashboard-agent-listen-port", str(agent), "--dashboard-agent-grpc-port", str(grpc),
            "--runtime-env-agent-port", str(runtime_env), "--metrics-export-port", str(metrics),
            "--node-manager-port", str(node_mgr), "--object-manager-port", str(obj_mgr),
        ]
        handle = open(log, "w")  # noqa: SIM115 - lives as long as the node
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=self.env(),
                                   start_new_session=True, cwd=self.root)
        self.nodes[name] = Node(name, process, log)

    def start_head(self, num_cpus: int, resources: dict[str, float]) -> None:
        self.gcs_port, self.dashboard_port, client = free_ports(3)
        self._start("head", ["--head", "--port", str(self.gcs_port), "--dashboard-port", str(self.dashboard_port),
                             "--include-dashboard", "true", "--dashboard-host", "127.0.0.1",
                             "--ray-client-server-port", str(client)],
                    num_cpus, resources)

    def start_worker(self, num_cpus: int, resources: dict[str, float], attempts: int = 3) -> None:
        """Start the worker and wait until it is one of 2 alive nodes; retried because `ray start`
        gives a raylet only 30 s to register, which a heavily loaded machine can exceed."""
        for attempt in range(attempts):
            self._start("worker", ["--address", self.address], num_cpus, resources)
            try:
                self.wait_nodes(2, 180)
                return
            except RuntimeError:
                self.nodes.pop("worker").kill()
                if attempt == attempts - 1:
                    raise

    def python(self, code: str, timeout: float = 120) -> Any:
        """Run ``code`` in a driver connected to this cluster; it prints one JSON value, returned here."""
        done = subprocess.run([sys.executable, "-c", code], env=self.env(), capture_output=True, text=True,
                              timeout=timeout, cwd=self.root)
        if done.returncode != 0:
            raise RuntimeError(f"cluster driver failed:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])

    def alive_nodes(self) -> list[dict[str, Any]]:
        return self.python(
            "import json, os, ray; ray.init(address=os.environ['RAY_ADDRESS'], log_to_driver=False);"
            "print(json.dumps([{'id': n['NodeID'], 'resources': n['Resources']} for n in ray.nodes() if n['Alive']]))"
        )

    def serve(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """The ``serve`` CLI of this virtualenv against this cluster's dashboard."""
        return subprocess.run([str(BIN / "serve"), *args, "-a", self.dashboard], env=self.env(),
                              capture_output=True, text=True, timeout=timeout, cwd=self.root)

    def replica_nodes(self) -> dict[str, list[str]]:
        """``{deployment: [node id of each ALIVE replica]}`` from Ray's state API."""
        return self.python(
            "import json, os, ray; ray.init(address=os.environ['RAY_ADDRESS'], log_to_driver=False)\n"
            "from ray.util.state import list_actors\n"
            "out = {}\n"
            "for a in list_actors(filters=[('state', '=', 'ALIVE')], limit=1000, detail=True):\n"
            "    name = a.name or ''\n"
            "    if name.startswith('SERVE_REPLICA::'):\n"
            "        out.setdefault(name.split('::')[1].split('#')[1], []).append(a.node_id)\n"
            "print(json.dumps(out))"
        )

    def stop(self) -> None:
        for name in ("worker", "head"):
            if name in self.nodes:
                self.nodes[name].kill()
        shutil.rmtree(self.temp_root, ignore_errors=True)

    def wait_nodes(self, count: int, timeout_s: float) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                nodes = self.alive_nodes()
                if len(nodes) == count:
                    return nodes
            except (RuntimeError, subprocess.TimeoutExpired):
                pass
            dead = [n.name for n in self.nodes.values() if n.process.poll() is not None]
            if time.monotonic() > deadline or dead:
                logs = "\n".join(n.log.read_text()[-2000:] for n in self.nodes.values())
                raise RuntimeError(f"cluster did not reach {count} nodes in {timeout_s} s (exited: {dead}):\n{logs}")
            time.sleep(2)

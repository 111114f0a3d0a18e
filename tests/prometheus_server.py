"""A real Prometheus server for tests: scrapes given targets every second, queried over its HTTP API.

Needs the ``prometheus`` binary (``make test`` installs Debian's package): skipped without it, a
failure on CI (``$CI`` set).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def prometheus_binary() -> str:
    binary = shutil.which("prometheus")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus is not installed (make test installs Debian's prometheus package)")
        pytest.skip("prometheus not on PATH; `make test` installs it")
    return binary


class PrometheusServer:
    """``with PrometheusServer(tmp, ["127.0.0.1:8000"]) as prom: prom.query("up")`` — job ``steadyrank``."""

    def __init__(self, root: Path, targets: list[str], rule_files: list[Path] = ()) -> None:
        self.root = Path(root)
        self.targets = targets
        self.rule_files = [str(p) for p in rule_files]
        self.api = f"http://127.0.0.1:{_free_port()}"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> PrometheusServer:
        config = self.root / "prometheus.yml"
        config.write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": self.rule_files,
            "scrape_configs": [{"job_name": "steadyrank", "metrics_path": "/metrics",
                                "static_configs": [{"targets": self.targets}]}],
        }))
        self.process = subprocess.Popen(
            [prometheus_binary(), f"--config.file={config}", f"--storage.tsdb.path={self.root / 'prometheus-data'}",
             f"--web.listen-address={self.api.removeprefix('http://')}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while not self._ready():
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.__exit__()
                raise AssertionError("prometheus did not become ready")
            time.sleep(0.5)
        return self

    def _ready(self) -> bool:
        try:
            return httpx.get(f"{self.api}/-/ready", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query: the result vector ([] when the query fails)."""
        response = httpx.get(f"{self.api}/api/v1/query", params={"query": expr}, timeout=10).json()
        return response["data"]["result"] if response.get("status") == "success" else []

    def get(self, path: str) -> Any:
        return httpx.get(f"{self.api}{path}", timeout=10).json()

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None

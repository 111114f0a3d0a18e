"""Limits before work against ``steadyrank serve`` as shipped (issue 36, item 1): an 8 MiB body of
invalid items, the size the default ``limits.max_body_bytes`` lets in, is refused within 1 s, and
the server's whole process tree (driver, Ray's processes, the Ingress replica that holds every
model, HAProxy) grows by less than 100 MiB at its peak. Before the fix such a body cost 88.8 s of
the event loop and 9.3 GiB in process (a 4 MiB one, 23.5 s and a 6.9 GiB tree against the server).

The server is test_lifecycle.py's: ``steadyrank serve`` in its own session with its own Ray (the
embedded default: colocated, HAProxy in front, the default limits). Each process's peak resident set
(``VmHWM``) is reset before the request (``/proc/<pid>/clear_refs``) and read after it: the sum of
the processes' growths bounds the tree's peak growth from above.
"""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path

import httpx
import psutil
import pytest

from steadyrank.serve.launcher.lifecycle import haproxies
from steadyrank.serve.settings import LimitsSettings
from tests.serve.test_lifecycle import Server, _haproxy_folder, server, shared  # noqa: F401 (the fixtures)

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.lifecycle, pytest.mark.e2e]

MIB = 1024 * 1024


def _status_kib(pid: int, key: str) -> int | None:
    try:
        found = re.search(rf"^{key}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(found.group(1)) if found else None


def _tree(srv: Server) -> list[psutil.Process]:
    procs = srv.tree()
    folders = {folder for proc in procs if (folder := _haproxy_folder(proc)) is not None}
    return procs + [p for folder in folders for p in haproxies(folder)]


def test_an_8_mib_body_of_invalid_items_is_refused_within_1_s_and_100_mib(server: Server) -> None:  # noqa: F811
    size = LimitsSettings().max_body_bytes
    head, tail = b'{"query": "q", "documents": [', b"0]}"
    body = head + b"0," * ((size - len(head) - len(tail)) // 2) + tail
    assert len(body) <= size
    with httpx.Client(base_url=server.url, timeout=120) as client:
        assert client.post("/v1/rerank", json={"query": "q", "documents": ["a"]}).status_code == 200  # warm
        before = {}
        for proc in _tree(server):
            with contextlib.suppress(OSError):
                Path(f"/proc/{proc.pid}/clear_refs").write_text("5")
                before[proc.pid] = _status_kib(proc.pid, "VmRSS")
        started = time.monotonic()
        response = client.post("/v1/rerank", content=body, headers={"content-type": "application/json"})
        took = time.monotonic() - started
        healthz = client.get("/healthz", timeout=5)
    growth = sum(max(0, (_status_kib(pid, "VmHWM") or rss) - rss) for pid, rss in before.items() if rss) / 1024
    print(f"8 MiB of invalid items against steadyrank serve: {response.status_code} in {took:.3f} s, "
          f"process tree peak +{growth:.1f} MiB over {len(before)} processes")
    assert response.status_code == 413, response.text[:300]
    assert response.json()["error"]["type"] == "payload_too_large"
    assert took < 1.0 and growth < 100, (took, growth)
    assert healthz.status_code == 200

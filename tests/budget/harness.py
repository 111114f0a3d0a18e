"""What one request costs the server: its answer and time, the process's peak memory growth, and the
worst wait a ``/healthz`` asked meanwhile saw.

The app is :func:`serve.server.http.create_app` around the stand-ins of tests/http/conftest.py (they
stand for the model replicas, which need weights and Ray), called through httpx's ASGI transport on
one event loop, the body sent in 64 KiB chunks without a ``Content-Length`` (as a socket delivers
it, and the case where no size is declared before the body). Meanwhile a probe task on the same
loop asks ``GET /healthz`` every :data:`PROBE_INTERVAL_S` and times each answer from when it was
due: anything that holds the event loop (or the GIL) delays the probe by as much. On a shared box
the process may also wait for a core, which delays the probe without any fault of the server's; so
each probe's delay is also charged in the process's CPU time (all its threads): the stall is the
smaller of the two, what the request's own work held the loop for (``stall_ms``, asserted), beside
the wall-clock answer (``healthz_ms``, reported).

Memory: the kernel's peak resident set (``VmHWM``) is reset (``/proc/self/clear_refs``, 5) after
the freed pages went back to the OS (``malloc_trim``), and read after the answer; its growth over
the resident set at the start counts every allocation, pydantic's Rust parser and numpy included
(which tracemalloc would not see).
"""

from __future__ import annotations

import asyncio
import gc
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from steadyrank.serve.server.memory import trim_freed_memory

PROBE_INTERVAL_S = 0.005
CHUNK_BYTES = 64 * 1024
MIB = 1024 * 1024


@dataclass(frozen=True)
class Measured:
    """One request's row of the table."""

    route: str
    body: str
    size: int  # bytes sent
    status: int
    seconds: float
    peak_mib: float  # growth of the process's peak resident set over its resident set before
    healthz_ms: float  # the slowest /healthz, from when it was due to its answer (wall clock)
    stall_ms: float  # the longest probe delay the process spent CPU time on (see the module docstring)
    answer: Any = field(compare=False)  # the JSON answer
    content_type: str = ""

    def row(self) -> str:
        size = f"{self.size / MIB:.2f} MiB" if self.size >= MIB // 4 else f"{self.size / 1024:.1f} KiB"
        return (f"| {self.route} | {self.body} | {size} | {self.status} | {self.seconds:.3f} | {self.peak_mib:.1f} "
                f"| {self.healthz_ms:.1f} | {self.stall_ms:.1f} |")


HEADER = ("| route | body | size | answer | seconds | peak MiB | worst /healthz ms | loop stall ms |\n"
          "|---|---|---|---|---|---|---|---|")

#: Every row measured in this session, for the table printed at its end (tests/budget/conftest.py).
ROWS: list[Measured] = []


def _status_kib(key: str) -> int:
    found = re.search(rf"^{key}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.MULTILINE)
    assert found is not None, f"/proc/self/status has no {key}"
    return int(found.group(1))


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


async def _chunks(body: bytes) -> AsyncIterator[bytes]:
    for at in range(0, len(body), CHUNK_BYTES):
        yield body[at:at + CHUNK_BYTES]


async def measure(served: Any, route: str, path: str, name: str, body: bytes,
                  headers: dict[str, str] | None = None) -> Measured:
    """POST ``body`` to ``path`` of ``served`` (tests/http/conftest.py ``Served``) while the probe
    runs; the row is added to :data:`ROWS`."""
    async with served.client(timeout=600) as client, served.client(timeout=600) as probe:
        await probe.get("/healthz")
        gc.collect()
        trim_freed_memory()
        _reset_peak()
        before = _status_kib("VmRSS")
        worst = stall = 0.0
        running, stop = asyncio.Event(), asyncio.Event()

        async def probing() -> None:
            """Each turn: the /healthz due at ``due`` (none once the request is answered: then only how
            late the probe woke), timed from ``due``."""
            nonlocal worst, stall
            due, cpu = time.perf_counter(), time.process_time()
            while True:
                if not stop.is_set():
                    await probe.get("/healthz")
                done = time.perf_counter()
                worst = max(worst, done - due)
                stall = max(stall, min(done - due, time.process_time() - cpu))
                running.set()
                if stop.is_set():
                    return
                due, cpu = done + PROBE_INTERVAL_S, time.process_time()
                await asyncio.sleep(PROBE_INTERVAL_S)

        task = asyncio.create_task(probing())
        await running.wait()  # the probe is waiting for its next turn when the request starts
        started = time.perf_counter()
        response = await client.post(path, content=_chunks(body),
                                     headers={"content-type": "application/json", **(headers or {})})
        seconds = time.perf_counter() - started
        stop.set()
        await task
        peak = (_status_kib("VmHWM") - before) / 1024
    measured = Measured(route, name, len(body), response.status_code, seconds, peak, worst * 1000, stall * 1000,
                        _json(response), response.headers.get("content-type", ""))
    ROWS.append(measured)
    return measured


def _json(response: Any) -> Any:
    try:
        return response.json()
    except ValueError:
        return None

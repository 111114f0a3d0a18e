"""Shared load-generation pieces of the serving benchmarks: the closed-loop window, latency
summaries, an async closed loop over any JSON endpoint (status mix, 503 shape, load average), peak
RSS, free ports and process-tree sampling."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np


class Window:
    """Closed-loop bookkeeping: every finished request as (start, end, ok); decides when to stop.

    The measured window starts after ``warmup`` seconds and at least ``level`` completions (the
    pipeline is full), and ends once it lasted ``duration`` seconds and holds ``min_requests``
    completions — or at ``max_duration`` since the beginning. Throughput = completions inside the
    window / its length; latencies = the requests completed inside it.
    """

    def __init__(self, level: int, duration: float, warmup: float, min_requests: int, max_duration: float) -> None:
        self.level, self.duration, self.warmup = level, duration, warmup
        self.min_requests, self.max_duration = min_requests, max_duration
        self.begin = time.perf_counter()
        self.records: list[tuple[float, float, bool]] = []
        self.stopped_at: float | None = None
        self.lock = threading.Lock()

    def add(self, start: float, end: float, ok: bool) -> None:
        with self.lock:
            self.records.append((start, end, ok))

    def _window_start(self) -> float | None:
        if len(self.records) < self.level:
            return None
        nth_end = sorted(r[1] for r in self.records)[self.level - 1]
        return max(self.begin + self.warmup, nth_end)

    def should_stop(self) -> bool:
        with self.lock:
            if self.stopped_at is not None:
                return True
            now = time.perf_counter()
            start = self._window_start()
            done = start is not None and now - start >= self.duration and \
                sum(1 for r in self.records if r[1] >= start) >= self.min_requests
            if done or now - self.begin >= self.max_duration:
                self.stopped_at = now
            return self.stopped_at is not None

    def bounds(self) -> tuple[float, float]:
        """(start, end) of the measured window (the whole run when it never filled before it stopped:
        completions that arrive while the stopped loop drains do not fill it afterwards)."""
        end = self.stopped_at or time.perf_counter()
        start = self._window_start()
        return (start if start is not None and start < end else self.begin), end

    def summary(self) -> dict[str, float]:
        start, end = self.bounds()
        inside = [r for r in self.records if start <= r[1] <= end]
        latencies = [r[1] - r[0] for r in inside if r[2]]
        out = summarise(latencies, sum(1 for r in inside if not r[2]), end - start)
        out["latencies_s"] = latencies
        return out


def summarise(latencies: list[float], errors: int, elapsed: float) -> dict[str, float]:
    """Successful requests, errors, window length (s), successful requests/s and latency quantiles (ms)."""
    values = np.asarray(latencies) * 1000.0
    return {
        "requests": int(values.size),
        "errors": int(errors),
        "window_s": float(elapsed),
        "throughput_rps": float(values.size / elapsed) if elapsed > 0 else 0.0,
        "p50_ms": float(np.percentile(values, 50)) if values.size else float("nan"),
        "p95_ms": float(np.percentile(values, 95)) if values.size else float("nan"),
        "p99_ms": float(np.percentile(values, 99)) if values.size else float("nan"),
        "mean_ms": float(values.mean()) if values.size else float("nan"),
    }


def peak_rss_mb(pid: int | str = "self") -> float:
    """Peak resident set (VmHWM) of one process, MiB (NaN when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: what a request of the load loops can fail with short of an HTTP answer (counted by exception name)
CLIENT_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, asyncio.TimeoutError)


def client_session(url: str, connections: int, timeout_s: float,
                   headers: dict[str, str] | None = None) -> aiohttp.ClientSession:
    """The load loops' HTTP client: an ``aiohttp`` session on ``url`` with up to ``connections``
    (+4) keep-alive connections. aiohttp, not httpx: on a 2-core box the client shares the CPU with
    the server it measures, and httpx's async client spends ~3 ms of CPU per request against
    aiohttp's ~0.1 ms (32 concurrent POSTs of 20 passages to a local server answering 503)."""
    return aiohttp.ClientSession(base_url=url, headers=headers,
                                 connector=aiohttp.TCPConnector(limit=connections + 4),
                                 timeout=aiohttp.ClientTimeout(total=timeout_s))


async def closed_loop(url: str, path: str, bodies: list[bytes], level: int, window: dict[str, Any],
                      headers: dict[str, str] | None = None, drain_s: float = 600.0,
                      timeout_s: float = 600.0, honor_retry_after_s: float = 0.0) -> dict[str, Any]:
    """``level`` clients each POST the next body to ``url + path`` as soon as their previous answer
    arrived, over a :class:`Window` (``window``: its keyword arguments). After the window the
    requests still in flight get ``drain_s`` seconds, then are cancelled (a client disconnect).
    ``honor_retry_after_s`` > 0: after a 503 carrying ``Retry-After``, a client waits that many
    seconds (at most ``honor_retry_after_s``) before its next request, as the Cohere and OpenAI SDKs
    do; 0: it sends the next request at once (a client that ignores the header).

    Returns the window summary plus ``status_codes`` (every answer, by status; transport errors by
    exception name), ``503_json`` / ``503_retry_after`` (how many 503 answers had a JSON body /
    a Retry-After header), ``503_p50_ms`` / ``503_p95_ms`` (how long the 503 answers took: a
    refusal should be fast), ``loadavg_1m_max`` (the highest 1-minute load average sampled each second
    during the loop) and ``loadavg_1m_after``.
    """
    codes: dict[str, int] = {}
    shape = {"503_json": 0, "503_retry_after": 0}
    refusals: list[float] = []  # seconds each 503 answer took
    loads: list[float] = [os.getloadavg()[0]]
    counter = 0
    json_body = {"Content-Type": "application/json"}
    async with client_session(url, level, timeout_s, headers) as client:
        try:  # warm; also waits out work a previous row left queued (when the server keeps it)
            async with client.post(path, data=bodies[0], headers=json_body) as response:
                await response.read()
        except CLIENT_ERRORS as exc:
            codes[f"warmup {type(exc).__name__}"] = 1
        w = Window(level, **window)

        async def worker() -> None:
            nonlocal counter
            while not w.should_stop():
                body = bodies[counter % len(bodies)]
                counter += 1
                start = time.perf_counter()
                try:
                    async with client.post(path, data=body, headers=json_body) as response:
                        await response.read()
                    key, ok = str(response.status), response.status == 200
                    backoff = 0.0
                    if response.status == 503:
                        retry_after = response.headers.get("Retry-After", "")
                        shape["503_retry_after"] += bool(retry_after)
                        shape["503_json"] += response.content_type == "application/json"
                        refusals.append(time.perf_counter() - start)
                        if honor_retry_after_s > 0 and retry_after.isdigit():
                            backoff = min(float(retry_after), honor_retry_after_s)
                except CLIENT_ERRORS as exc:
                    key, ok, backoff = type(exc).__name__, False, 0.0
                codes[key] = codes.get(key, 0) + 1
                w.add(start, time.perf_counter(), ok)
                if backoff:
                    await asyncio.sleep(backoff)

        async def sample_load() -> None:
            while True:
                await asyncio.sleep(1.0)
                loads.append(os.getloadavg()[0])

        sampler = asyncio.create_task(sample_load())
        workers = [asyncio.create_task(worker()) for _ in range(level)]
        while not w.should_stop():
            await asyncio.sleep(0.1)
        _, pending = await asyncio.wait(workers, timeout=drain_s)
        for task in [*pending, sampler]:
            task.cancel()
        await asyncio.gather(*pending, sampler, return_exceptions=True)
    out: dict[str, Any] = w.summary()
    out["status_codes"] = dict(sorted(codes.items()))
    out["cancelled_after_window"] = len(pending)
    out.update(shape)
    out["503_p50_ms"], out["503_p95_ms"] = (
        (float(np.percentile(refusals, 50) * 1000.0), float(np.percentile(refusals, 95) * 1000.0)) if refusals
        else (None, None))
    out["loadavg_1m_max"] = max(loads)
    out["loadavg_1m_after"] = os.getloadavg()[0]  # other load on a shared machine shows here
    return out


def process_label(proc: Any) -> str:
    """A short name for a process of a server tree: Ray's actor title (``ray::ServeReplica:app:
    Reranker``, ``ray::ProxyActor``), a Ray binary or script (``raylet``, ``gcs_server``,
    ``dashboard.py``), else the executable and module (``python -m steadyrank.serve.cli``)."""
    args = proc.cmdline()
    if not args:
        return proc.name()
    if args[0].startswith("ray::"):
        return args[0].split(".", 1)[0] if "ServeReplica" in args[0] else args[0]
    words = [a for a in args[1:] if not a.startswith("-")]
    script = next((w for w in words if w.endswith(".py")), None)
    if script:
        return Path(script).name
    if "-m" in args:
        return f"python -m {args[args.index('-m') + 1]}"
    return Path(args[0]).name


class TreeSampler:
    """Samples a process tree (a root pid and its descendants, plus the processes ``extra()``
    returns) every ``period_s`` in a thread: the peak of the summed RSS (MiB), the count of
    processes at that peak and each one's RSS then (``rss_at_peak_mb``, by :func:`process_label`);
    :meth:`cpu_percent` measures the tree's CPU over an interval (per process in ``idle_cpu_pct``)."""

    def __init__(self, root: int, extra: Any = None, period_s: float = 0.5) -> None:
        self.root, self.extra, self.period_s = root, extra or (lambda: []), period_s
        self.peak_mb, self.processes_at_peak = 0.0, 0
        self.rss_at_peak_mb: dict[str, float] = {}
        self.idle_cpu_pct: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def processes(self) -> list[Any]:
        import psutil

        try:
            root = psutil.Process(self.root)
            found = {root.pid: root, **{p.pid: p for p in root.children(recursive=True)}}
        except psutil.NoSuchProcess:
            found = {}
        found.update({p.pid: p for p in self.extra()})
        return list(found.values())

    def sample(self) -> None:
        import psutil

        total, count, by_label = 0.0, 0, {}
        for proc in self.processes():
            try:
                rss = proc.memory_info().rss / 2**20
                label = process_label(proc)
            except psutil.Error:
                continue
            total += rss
            count += 1
            by_label[label] = by_label.get(label, 0.0) + rss
        if total > self.peak_mb:
            self.peak_mb, self.processes_at_peak, self.rss_at_peak_mb = total, count, by_label

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.sample()

    def start(self) -> TreeSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def cpu_percent(self, seconds: float) -> float:
        """The tree's CPU time over ``seconds`` as a percentage of the whole machine (all cores)."""
        import psutil

        def cpu_total() -> dict[int, tuple[str, float]]:
            out = {}
            for proc in self.processes():
                try:
                    t = proc.cpu_times()
                    out[proc.pid] = (process_label(proc), t.user + t.system)
                except psutil.Error:
                    continue
            return out

        before = cpu_total()
        time.sleep(seconds)
        after = cpu_total()
        scale = 100.0 / seconds / (os.cpu_count() or 1)
        per_label: dict[str, float] = {}
        for pid, (label, used) in after.items():
            per_label[label] = per_label.get(label, 0.0) + (used - before.get(pid, (label, 0.0))[1]) * scale
        self.idle_cpu_pct = per_label
        return sum(per_label.values())

"""Serving benchmark: ``/v1/rerank`` on the real Ray Serve app against the in-process runtime.

Run: ``python benchmarks/bench_serve.py [--config FILE] [--shadow on|off|both] [--probes both]
[--concurrency 1,8,32] [--docs 100] [--duration S] [--out results.json] [--json]``.

Closed loop: C clients (1, 8, 32 by default) each send a ``/v1/rerank`` request with ``--docs``
documents (demo-corpus passages, ``top_n`` 10) as soon as their previous answer arrived. Each level
is measured over a window that starts after the warm-up and ``C`` completions (the pipeline is
full) and lasts at least ``--duration`` seconds and ``max(--min-requests, C)`` completions (at most
``--max-duration`` per level). Reported per level: throughput (requests/s), p50/p95/p99 latency,
errors and status codes. A fixed-overhead probe (``--probe-docs`` documents, 1 client) follows.

In the same run the in-process runtime (``load_scorer(...).rerank``, same model, same inputs, same
torch thread count as the server's reranker replica) runs the same closed loop in a separate process
(so its peak RSS is its own) while the server is idle. By default it runs 1 client: one model using
every core is its saturation point (one 100-document request already fills a forward batch); more
with ``--inprocess-concurrency``.

Derived: **server overhead at p50** = server p50 − in-process p50 at 1 client (target ≤ 5 ms), and
the same for the small probe; **saturation throughput ratio** = best server throughput / best
in-process throughput (target ≥ 0.9). Peak RSS: the in-process process; the server's = the sum of
the peak RSS (VmHWM) of the application's replica processes (per replica in the JSON).

Settings: ``--config`` is a steadyrank settings file (default: the embedded default with the
reranker's ``torch_threads`` set to this machine's cores and batches of up to 8 requests).
``--shadow on|off`` switches the shadow evaluator (``quality.enabled``; default off) for the whole
benchmark above. ``--shadow both`` runs the evaluator comparison instead: user latency of
``/v1/rerank`` with the evaluator off and on, in the same run, at its configured interval and
sample size. Each of ``--rounds`` rounds starts the server once per setting (off then on, and on
then off in the next round, so slow drifts of a shared machine hit both alike) and measures two
loads per start: a closed loop of 1 client (the server is never idle: the worst case, where shadow
work can only run when ``admission.shadow_max_wait_s`` forces it) and open-loop Poisson arrivals at
``--load`` × the 1-client throughput measured in the first "off" window (the server has idle
gaps, as a service run below saturation does). Open-loop latency runs from the scheduled arrival to
the response, so a late request is never hidden. Reported per load: pooled p50/p95/p99 off and on,
the ratio p95 on / p95 off (target ≤ 1.05), and the golden evaluations the evaluator completed
inside the "on" windows (a comparison with an evaluator that did no work would prove nothing).

``--probes both`` runs the same comparison for the live Δ-margin probes (``quality.probes``): the
evaluator is on in both arms, its probes off in one and on in the other, replaying every
``--probe-interval`` seconds (default 5: sixty times the 300 s default, so several rounds fall
inside every measured window). Target: p95 on / p95 off ≤ 1.01; the probe rounds completed inside
the "on" windows (``steadyrank_probe_rounds_total``) are reported. Off, no probe code runs on any
path (the evaluator does not create the probe loop), so the "off" arm is the evaluator as it was
before the probes existed.

The load generator shares the machine with the server: on a small box it takes CPU from it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._load import Window, client_session, closed_loop, free_port, peak_rss_mb, summarise  # noqa: E402
from benchmarks._report import emit, write_json  # noqa: E402

API_KEY = "bench-key"
HEADERS = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}


# ---------------------------------------------------------------------------------------------
# inputs


def make_inputs(n_requests: int, n_docs: int) -> list[tuple[str, list[str]]]:
    """(query, documents) pairs from the demo data: each demo query with ``n_docs`` distinct passages."""
    from steadyrank.retrieval.corpus import read_documents, read_queries
    from steadyrank.serve.server.default import DEMO_DIR

    passages = [d.full_text for d in read_documents(DEMO_DIR / "corpus.jsonl")]
    queries = list(read_queries(DEMO_DIR / "queries.jsonl").values())
    rng = np.random.default_rng(0)
    out = []
    for i in range(n_requests):
        picks = rng.choice(len(passages), size=n_docs, replace=n_docs > len(passages))
        # a request-specific prefix keeps every text unique across requests, so a server batch of
        # several requests cannot save work by encoding a shared passage once (a bi-encoder would)
        out.append((queries[i % len(queries)], [f"[{i}.{k}] {passages[j]}" for k, j in enumerate(picks)]))
    return out


def window_limits(args: argparse.Namespace, level: int, min_requests: int | None = None) -> dict[str, Any]:
    """A measured window's limits (:class:`Window`) for ``level`` clients, from the command line."""
    return {"duration": args.duration, "warmup": args.warmup, "max_duration": args.max_duration,
            "min_requests": max(min_requests or args.min_requests, level)}


def rerank_bodies(inputs: list[tuple[str, list[str]]], top_n: int) -> list[bytes]:
    """The ``/v1/rerank`` JSON bodies of ``inputs``."""
    return [json.dumps({"query": q, "documents": d, "top_n": top_n}).encode() for q, d in inputs]


def pooled(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One summary of several measured windows (latencies pooled, throughput over the summed windows)."""
    latencies = [x for p in parts for x in p["latencies_s"]]
    out = summarise(latencies, sum(p["errors"] for p in parts), sum(p["window_s"] for p in parts))
    out["latencies_s"] = latencies
    return out


def public(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if k != "latencies_s"}


# ---------------------------------------------------------------------------------------------
# in-process runtime (child process)


def _inprocess_child(model: dict, threads: int | None, top_n: int, conn: Any) -> None:
    """Load the scorer, then run closed loops on command: ``(level, items, window)`` → summary;
    ``None`` → reply with the peak RSS and exit."""
    import torch

    from steadyrank.serve.runtime import ModelSettings, load_scorer

    if threads:
        torch.set_num_threads(threads)
    scorer = load_scorer(ModelSettings.model_validate(model))
    conn.send({"torch_threads": torch.get_num_threads(), "model": scorer.model_id, "precision": scorer.precision})
    while True:
        command = conn.recv()
        if command is None:
            conn.send({"peak_rss_mb": peak_rss_mb()})
            return
        level, items, limits = command
        scorer.rerank(items[0][0], items[0][1], top_n=top_n)  # warm
        w = Window(level, **limits)
        counter = [0]

        def worker() -> None:
            while not w.should_stop():  # noqa: B023
                with w.lock:  # noqa: B023
                    i = counter[0]  # noqa: B023
                    counter[0] += 1  # noqa: B023
                query, docs = items[i % len(items)]  # noqa: B023
                start = time.perf_counter()
                try:
                    scorer.rerank(query, docs, top_n=top_n)
                    ok = True
                except Exception:  # noqa: BLE001
                    ok = False
                w.add(start, time.perf_counter(), ok)  # noqa: B023

        pool = [threading.Thread(target=worker) for _ in range(level)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        conn.send(w.summary())


class InProcess:
    """The in-process runtime in its own process (its own peak RSS; torch threads as the server's)."""

    def __init__(self, model: dict, threads: int | None, top_n: int) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child_end = ctx.Pipe()
        self.process = ctx.Process(target=_inprocess_child, args=(model, threads, top_n, child_end), daemon=True)
        self.process.start()
        self.info = self.conn.recv()

    def run(self, level: int, items: list, window: dict) -> dict[str, Any]:
        self.conn.send((level, items, window))
        return self.conn.recv()

    def close(self) -> float:
        self.conn.send(None)
        rss = self.conn.recv()["peak_rss_mb"]
        self.process.join()
        return rss


async def _open_loop(url: str, inputs: list, rate: float, window: dict, top_n: int, seed: int) -> dict[str, Any]:
    """Poisson arrivals at ``rate`` requests/s for ``warmup + duration`` seconds; the requests that
    arrive after the warm-up are measured, latency from their scheduled arrival to the response."""
    bodies = rerank_bodies(inputs, top_n)
    rng = np.random.default_rng(seed)
    codes: dict[int, int] = {}
    records: list[tuple[float, float, bool]] = []
    async with client_session(url, 256, 600, HEADERS) as client:
        async with client.post("/v1/rerank", data=bodies[0]) as response:
            await response.read()

        async def one(body: bytes, due: float, measured: bool) -> None:
            async with client.post("/v1/rerank", data=body) as response:
                await response.read()
            codes[response.status] = codes.get(response.status, 0) + 1
            if measured:
                records.append((due, time.perf_counter(), response.status == 200))

        begin = time.perf_counter()
        measured_from, end = begin + window["warmup"], begin + window["warmup"] + window["duration"]
        due, tasks, i = begin, [], 0
        while True:
            due += float(rng.exponential(1.0 / rate))
            if due >= end:
                break
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            tasks.append(asyncio.create_task(one(bodies[i % len(bodies)], due, due >= measured_from)))
            i += 1
        await asyncio.gather(*tasks)
    latencies = [e - s for s, e, ok in records if ok]
    out: dict[str, Any] = summarise(latencies, sum(1 for *_, ok in records if not ok), window["duration"])
    out["latencies_s"] = latencies
    out["offered_rps"] = rate
    out["status_codes"] = {str(k): v for k, v in sorted(codes.items())}
    return out


def golden_counters(url: str) -> dict[str, float]:
    """The evaluator's progress from ``/metrics``: golden evaluations (replay, mirror) and failures,
    live probe rounds (ok, failed), and the count and sum of shadow waits on the primary reranker."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    out = {"replay": 0.0, "mirror": 0.0, "failures": 0.0, "probe_rounds": 0.0, "probe_failures": 0.0,
           "shadow_waits": 0.0, "shadow_wait_s": 0.0}
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=30).text):
        for sample in family.samples:
            if sample.name == "steadyrank_golden_evaluations_total":
                out[sample.labels["source"]] += sample.value
            elif sample.name == "steadyrank_golden_failures_total":
                out["failures"] += sample.value
            elif sample.name == "steadyrank_probe_rounds_total":
                out["probe_rounds" if sample.labels["outcome"] == "ok" else "probe_failures"] += sample.value
            elif sample.labels.get("deployment") == "reranker" and sample.name.startswith("steadyrank_shadow_wait_seconds"):
                if sample.name.endswith("_count"):
                    out["shadow_waits"] += sample.value
                elif sample.name.endswith("_sum"):
                    out["shadow_wait_s"] += sample.value
    return out


def ratio_ci(on: list[float], off: list[float], q: float, resamples: int = 2000, seed: int = 0) -> list[float]:
    """Percentile-bootstrap 95% interval of percentile_q(on) / percentile_q(off), each sample
    resampled independently (the two windows are independent runs)."""
    rng = np.random.default_rng(seed)
    a, b = np.asarray(on), np.asarray(off)
    ratios = [np.percentile(rng.choice(a, a.size), q) / np.percentile(rng.choice(b, b.size), q) for _ in range(resamples)]
    return [float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))]


def compare_shadow(args: argparse.Namespace, log: Any, subject: str = "shadow") -> None:
    """``--shadow both`` (``subject`` "shadow": the evaluator) or ``--probes both`` ("probes": its live
    probes, the evaluator on in both arms): user latency off and on, in one run (see the module doc)."""
    inputs = make_inputs(64, args.docs)
    windows = window_limits(args, 1)
    runs: list[dict[str, Any]] = []
    rate: float | None = None
    quality = admission = None
    target = 1.05 if subject == "shadow" else 1.01
    for r in range(args.rounds):
        for shadow in (("off", "on") if r % 2 == 0 else ("on", "off")):
            if subject == "shadow":
                settings = bench_settings(args.config, shadow)
            else:
                settings = bench_settings(args.config, "on", probes=args.probe_interval if shadow == "on" else None)
            if shadow == "on":  # the settings of the arm doing the work
                quality, admission = settings.quality, settings.admission
            with Server(settings) as server:
                before = golden_counters(server.url)
                closed = asyncio.run(_closed_loop(server.url, inputs, 1, windows, args.top_n))
                if rate is None:
                    rate = args.load * closed["throughput_rps"]
                    log(f"open-loop rate {rate:.3f} req/s = {args.load} × the 1-client throughput")
                poisson = asyncio.run(_open_loop(server.url, inputs, rate, windows, args.top_n, seed=r))
                after = golden_counters(server.url)
            work = {k: after[k] - before[k] for k in after}
            runs.append({"round": r + 1, "arm": shadow, "closed_1": closed, "poisson": poisson, "evaluator": work})
            log(f"round {r + 1} {subject} {shadow}: closed p95 {closed['p95_ms']:.0f} ms, poisson p95 "
                f"{poisson['p95_ms']:.0f} ms; replays {work['replay']:.0f}, failures {work['failures']:.0f}, "
                f"probe rounds {work['probe_rounds']:.0f}")
    loads = {"closed_1": "closed loop, 1 client", "poisson": f"Poisson {rate:.2f} req/s"}
    pooled_by = {(load, shadow): pooled([run[load] for run in runs if run["arm"] == shadow])
                 for load in loads for shadow in ("off", "on")}
    replays_on = sum(run["evaluator"]["replay"] for run in runs if run["arm"] == "on")
    probe_rounds_on = sum(run["evaluator"]["probe_rounds"] for run in runs if run["arm"] == "on")
    derived = {load: {"p95_ratio_on_off": pooled_by[(load, "on")]["p95_ms"] / pooled_by[(load, "off")]["p95_ms"],
                      "p95_ratio_ci95": ratio_ci(pooled_by[(load, "on")]["latencies_s"],
                                                 pooled_by[(load, "off")]["latencies_s"], 95.0),
                      "p50_ratio_on_off": pooled_by[(load, "on")]["p50_ms"] / pooled_by[(load, "off")]["p50_ms"]}
               for load in loads}
    for load in loads:
        derived[load][f"target_p95_ratio<={target}"] = derived[load]["p95_ratio_on_off"] <= target
    payload = {
        "benchmark": "bench_serve", "mode": f"{subject} comparison", "endpoint": "/v1/rerank",
        "docs_per_request": args.docs, "top_n": args.top_n, "cpu_count": os.cpu_count(),
        "quality": None if quality is None else quality.model_dump(mode="json", exclude={"canary"}),
        "admission": None if admission is None else admission.model_dump(mode="json"),  # shadow_* among them
        "open_loop_rate_rps": rate, "load": args.load,
        "pooled": {f"{load}/{shadow}": public(v) for (load, shadow), v in pooled_by.items()},
        "golden_replays_in_on_windows": replays_on,
        "probe_rounds_in_on_windows": probe_rounds_on,
        "derived": derived,
        "runs": [{**run, "closed_1": public(run["closed_1"]), "poisson": public(run["poisson"])} for run in runs],
    }
    rows = [[loads[load], shadow, v["requests"], v["errors"], v["throughput_rps"], v["p50_ms"], v["p95_ms"], v["p99_ms"]]
            for (load, shadow), v in pooled_by.items()]
    if args.out:
        payload = write_json(args.out, payload)
    emit(payload, ["load", "evaluator" if subject == "shadow" else "live probes", "requests", "errors", "req/s",
                   "p50 ms", "p95 ms", "p99 ms"], rows, json_only=args.json)
    print("p95 on/off: " + ", ".join(f"{loads[load]} {derived[load]['p95_ratio_on_off']:.3f} (95% CI "
                                     f"{derived[load]['p95_ratio_ci95'][0]:.3f}–{derived[load]['p95_ratio_ci95'][1]:.3f})"
                                     for load in loads)
          + f"; during the 'on' windows: golden replays {replays_on:.0f}, probe rounds {probe_rounds_on:.0f}",
          file=sys.stderr if args.json else sys.stdout)


async def _closed_loop(url: str, inputs: list, level: int, window: dict, top_n: int) -> dict[str, Any]:
    return await closed_loop(url, "/v1/rerank", rerank_bodies(inputs, top_n), level, window, HEADERS)


def server_rss() -> dict[str, Any]:
    """Peak RSS (VmHWM) of the application's replica processes, by deployment."""
    per: dict[str, float] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cmd.startswith("ray::ServeReplica:"):
            name = cmd.split()[0].removeprefix("ray::ServeReplica:")
            per[name] = per.get(name, 0.0) + peak_rss_mb(proc.name)
    return {"total_mb": sum(per.values()), "max_mb": max(per.values(), default=float("nan")), "replicas_mb": per}


def bench_settings(config: str | None, shadow: str, probes: float | None = None) -> Any:
    """The benchmark's settings: the evaluator on or off (``shadow``); with ``probes``, its live probes on
    at that interval in seconds."""
    from steadyrank.serve.server.hosting.builder import resolve_settings
    from steadyrank.serve.settings import Settings, load_settings

    if config:
        raw = resolve_settings(config).model_dump(mode="python")
    else:
        raw = Settings().model_dump(mode="python")
        cores = os.cpu_count() or 1
        raw["deployments"]["reranker"].update(torch_threads=cores, max_batch_size=8, max_ongoing_requests=64,
                                              max_queued_requests=-1)
        raw["deployments"]["ingress"].update(num_cpus=0.1)
    raw["quality"]["enabled"] = shadow == "on"
    if probes is not None:
        raw["quality"]["probes"].update(enabled=True, interval_s=probes)
    raw["auth"]["api_keys"] = [API_KEY]
    raw["limits"]["max_body_bytes"] = max(raw["limits"]["max_body_bytes"], 64 * 1024 * 1024)
    # a closed loop of 32 clients queues for minutes on a small CPU box: measure it, do not time it out
    raw["limits"]["request_timeout_s"] = max(raw["limits"]["request_timeout_s"], 900.0)
    return load_settings(raw)


class Server:
    """The application on a local Ray instance, for the duration of a ``with`` block.

    Meanwhile the process' standard output goes to standard error: Ray prints raylet and
    shutdown messages on stdout, which is reserved for the benchmark's JSON.
    """

    def __init__(self, settings: Any) -> None:
        self.settings = settings

    def __enter__(self) -> Server:
        import httpx
        import ray
        from ray import serve as ray_serve

        from steadyrank.serve.server.default import ensure_index
        from steadyrank.serve.server.hosting.builder import build_app

        sys.stdout.flush()
        self._stdout = os.dup(1)
        os.dup2(2, 1)
        settings = self.settings
        ensure_index(settings)
        reserved = settings.deployments.total_cpus(canary=settings.canary is not None,
                                                   evaluator=settings.quality.enabled)
        ray.init(num_cpus=max(os.cpu_count() or 1, int(np.ceil(reserved))), include_dashboard=False,
                 log_to_driver=False)
        port = free_port()
        ray_serve.start(http_options={"host": "127.0.0.1", "port": port})
        started = time.perf_counter()
        ray_serve.run(build_app({"settings": settings}), name="steadyrank", route_prefix="/")
        self.url = f"http://127.0.0.1:{port}"
        while httpx.get(f"{self.url}/readyz", timeout=30).status_code != 200:
            time.sleep(0.5)
        self.startup_s = time.perf_counter() - started
        # /readyz names its checks to an authenticated caller only
        self.reranker = httpx.get(f"{self.url}/readyz", headers=HEADERS, timeout=30).json()["checks"]["reranker"]
        return self

    def __exit__(self, *exc: object) -> None:
        import ray
        from ray import serve as ray_serve

        try:
            ray_serve.shutdown()
        finally:
            ray.shutdown()
            sys.stdout.flush()
            os.dup2(self._stdout, 1)
            os.close(self._stdout)


# ---------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=None, help="steadyrank settings file (default: embedded default)")
    parser.add_argument("--shadow", choices=["on", "off", "both"], default="off",
                        help="shadow evaluator (quality.enabled) on or off for the whole benchmark, or 'both': "
                             "compare user latency with it off and on in one run (default %(default)s)")
    parser.add_argument("--probes", choices=["both"], default=None,
                        help="'both': compare user latency with the evaluator's live probes (quality.probes) off and "
                             "on, the evaluator on in both (instead of the benchmark above)")
    parser.add_argument("--probe-interval", type=float, default=5.0,
                        help="--probes both: seconds between probe rounds in the 'on' arm (default %(default)s)")
    parser.add_argument("--load", type=float, default=0.5,
                        help="--shadow/--probes both: open-loop rate as a fraction of the 1-client throughput "
                             "(default %(default)s)")
    parser.add_argument("--concurrency", default="1,8,32", help="server closed-loop client counts (default %(default)s)")
    parser.add_argument("--docs", type=int, default=100, help="documents per request (default %(default)s)")
    parser.add_argument("--top-n", type=int, default=10, help="top_n per request (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="alternating in-process / server rounds at 1 client (default %(default)s)")
    parser.add_argument("--duration", type=float, default=20.0, help="measured seconds per window at least (default %(default)s)")
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds per window (default %(default)s)")
    parser.add_argument("--min-requests", type=int, default=10,
                        help="completions per measured window at least (default %(default)s, or the client count if larger)")
    parser.add_argument("--max-duration", type=float, default=150.0, help="seconds per window at most (default %(default)s)")
    parser.add_argument("--probe-docs", type=int, default=1,
                        help="documents per request of the fixed-overhead probe at 1 client (default %(default)s)")
    parser.add_argument("--skip-inprocess", action="store_true", help="measure the server only")
    parser.add_argument("--out", default=None, help="also write the JSON here")
    parser.add_argument("--json", action="store_true", help="table to stderr, only JSON on stdout")
    args = parser.parse_args()
    levels = sorted({int(x) for x in args.concurrency.split(",") if x.strip()} | {1})
    log = lambda message: print(f"bench_serve: {message}", file=sys.stderr, flush=True)  # noqa: E731
    if args.shadow == "both" or args.probes == "both":
        compare_shadow(args, log, "shadow" if args.shadow == "both" else "probes")
        return

    settings = bench_settings(args.config, args.shadow)
    inputs = make_inputs(64, args.docs)
    probe_inputs = [(q, d[: args.probe_docs]) for q, d in inputs]
    probe_window = {**window_limits(args, 1, 50), "duration": max(5.0, args.duration / 4)}
    threads = settings.deployments.reranker.torch_threads
    model = settings.reranker_model.model_dump(mode="python")
    log(f"{args.docs} docs/request, server levels {levels}, {args.rounds} alternating rounds at 1 client, "
        f"shadow {args.shadow}")

    def server_loop(items: list, level: int, limits: dict) -> dict[str, Any]:
        return asyncio.run(_closed_loop(server.url, items, level, limits, args.top_n))

    rounds: list[dict[str, Any]] = []
    with Server(settings) as server:
        log(f"server ready in {server.startup_s:.0f} s at {server.url}")
        inproc = None if args.skip_inprocess else InProcess(model, threads, args.top_n)
        for r in range(args.rounds):  # alternate, so slow drifts of a shared machine hit both alike
            one: dict[str, Any] = {}
            if inproc is not None:
                one["inprocess"] = inproc.run(1, inputs, window_limits(args, 1))
            one["server"] = server_loop(inputs, 1, window_limits(args, 1))
            if inproc is not None:
                one["inprocess_probe"] = inproc.run(1, probe_inputs, probe_window)
            one["server_probe"] = server_loop(probe_inputs, 1, probe_window)
            rounds.append(one)
            log(f"round {r + 1}: server p50 {one['server']['p50_ms']:.0f} ms" +
                (f", in-process p50 {one['inprocess']['p50_ms']:.0f} ms" if inproc else ""))
        server_levels = {1: pooled([r["server"] for r in rounds])}
        for level in levels:
            if level != 1:
                server_levels[level] = server_loop(inputs, level, window_limits(args, level))
                log(f"server c={level}: {server_levels[level]['throughput_rps']:.2f} req/s, "
                    f"p50 {server_levels[level]['p50_ms']:.0f} ms")
        rss = server_rss()
        reranker, startup_s = server.reranker, server.startup_s
        inproc_rss = inproc.close() if inproc is not None else None

    probe = pooled([r["server_probe"] for r in rounds])
    inprocess = None
    derived: dict[str, Any] = {}
    if inproc is not None:
        inprocess = {"levels": {1: pooled([r["inprocess"] for r in rounds])},
                     "probe": pooled([r["inprocess_probe"] for r in rounds]),
                     "peak_rss_mb": inproc_rss, **inproc.info}
        paired = [r["server"]["p50_ms"] - r["inprocess"]["p50_ms"] for r in rounds]
        paired_probe = [r["server_probe"]["p50_ms"] - r["inprocess_probe"]["p50_ms"] for r in rounds]
        derived["server_overhead_p50_ms"] = float(np.median(paired))
        derived["server_overhead_p50_ms_per_round"] = paired
        derived["probe_overhead_p50_ms"] = float(np.median(paired_probe))
        derived["probe_overhead_p50_ms_per_round"] = paired_probe
        best_server = max(v["throughput_rps"] for v in server_levels.values())
        derived["saturation_throughput_ratio"] = best_server / inprocess["levels"][1]["throughput_rps"]
        derived["targets"] = {"server_overhead_p50_ms<=5": derived["server_overhead_p50_ms"] <= 5.0,
                              "saturation_throughput_ratio>=0.9": derived["saturation_throughput_ratio"] >= 0.9}
    payload = {
        "benchmark": "bench_serve",
        "endpoint": "/v1/rerank",
        "docs_per_request": args.docs,
        "top_n": args.top_n,
        "shadow": args.shadow,
        "cpu_count": os.cpu_count(),
        "reranker": reranker,
        "torch_threads": threads,
        "server": {"levels": {k: public(v) for k, v in server_levels.items()}, "probe": public(probe),
                   "startup_s": startup_s, "rss": rss},
        "inprocess": None if inprocess is None else {
            **inprocess, "levels": {1: public(inprocess["levels"][1])}, "probe": public(inprocess["probe"])},
        "rounds": [{k: public(v) for k, v in r.items()} for r in rounds],
        **derived,
    }
    rows = []

    def row(name: str, docs: int, level: int, r: dict[str, Any], rss_mb: float) -> None:
        rows.append([name, docs, level, r["requests"], r["errors"], r["throughput_rps"], r["p50_ms"], r["p95_ms"],
                     r["p99_ms"], rss_mb])

    for level in levels:
        row("server", args.docs, level, server_levels[level], rss["total_mb"])
        if inprocess is not None and level == 1:
            row("in-process", args.docs, 1, inprocess["levels"][1], inprocess["peak_rss_mb"])
    row("server", args.probe_docs, 1, probe, rss["total_mb"])
    if inprocess is not None:
        row("in-process", args.probe_docs, 1, inprocess["probe"], inprocess["peak_rss_mb"])
    if args.out:
        payload = write_json(args.out, payload)
    emit(payload, ["runner", "docs", "clients", "requests", "errors", "req/s", "p50 ms", "p95 ms", "p99 ms",
                   "peak RSS MB"], rows, json_only=args.json)
    if derived:
        print(f"server overhead at p50 (1 client, {args.docs} docs, median of paired rounds): "
              f"{derived['server_overhead_p50_ms']:.1f} ms; fixed overhead ({args.probe_docs} doc): "
              f"{derived['probe_overhead_p50_ms']:.1f} ms; saturation throughput ratio: "
              f"{derived['saturation_throughput_ratio']:.3f}", file=sys.stderr if args.json else sys.stdout)


if __name__ == "__main__":
    main()

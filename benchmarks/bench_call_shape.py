"""What the colocated layout's call shape costs: ``await handle.method.remote(...)`` through the
:class:`~serve.server.hosting.colocated.LocalHandle` against a direct ``await component.method(...)``.

In the colocated layout (the default) the HTTP edge calls every component through a ``LocalHandle``,
which gives an in-process object the call shape of a Ray Serve ``DeploymentHandle`` so that one edge
serves both layouts: ``.remote()`` starts the method at once as a task on the replica's event loop
(as a Ray handle dispatches at once), and the caller awaits it later. A direct call would skip one
task creation and one event-loop turn. Measured here per call, interleaved in one process, for two
methods shaped like the components': ``noop`` (returns at once: the hop alone) and ``compute``
(hands its work to a one-thread executor and awaits it, as every component's model or FAISS work
does: the hop next to the executor round trip the call makes anyway). Medians over ``--rounds``
rounds of ``--calls`` sequential calls; the extra microseconds per call are the figure to set
against a request's latency (a 1-document rerank: ~16 ms on 2 cores, ``bench_peers.py``). Run:
``python benchmarks/bench_call_shape.py [--calls 20000] [--rounds 9] [--out FILE] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from _report import emit, write_json  # benchmarks/ is on sys.path when run as a script

from steadyrank.serve.server.hosting.colocated import LocalHandle


class Component:
    """Two async methods shaped like a component's: one that returns at once, one that computes on
    the component's single compute thread."""

    def __init__(self) -> None:
        self.compute_thread = ThreadPoolExecutor(1)

    async def noop(self, value: int) -> int:
        return value

    async def compute(self, value: int) -> int:
        return await asyncio.get_running_loop().run_in_executor(self.compute_thread, abs, value)


async def per_call_us(call: Callable[[int], Awaitable[Any]], calls: int) -> float:
    """Microseconds per call of ``calls`` sequential awaited calls."""
    start = time.perf_counter()
    for i in range(calls):
        await call(i)
    return (time.perf_counter() - start) / calls * 1e6


async def measure(calls: int, rounds: int) -> list[dict[str, Any]]:
    component = Component()
    handle = LocalHandle(component)
    shapes: dict[str, dict[str, Callable[[int], Awaitable[Any]]]] = {
        "noop": {"direct": component.noop, "local_handle": handle.noop.remote},
        "compute": {"direct": component.compute, "local_handle": handle.compute.remote},
    }
    rows = []
    for method, variants in shapes.items():
        times: dict[str, list[float]] = {name: [] for name in variants}
        for call in variants.values():  # warm-up
            await per_call_us(call, calls // 10)
        for _ in range(rounds):
            for name, call in variants.items():
                times[name].append(await per_call_us(call, calls))
        direct, local = statistics.median(times["direct"]), statistics.median(times["local_handle"])
        rows.append({"method": method, "direct_us": round(direct, 2), "local_handle_us": round(local, 2),
                     "extra_us": round(local - direct, 2), "ratio": round(local / direct, 3),
                     "direct_runs_us": [round(t, 2) for t in times["direct"]],
                     "local_handle_runs_us": [round(t, 2) for t in times["local_handle"]]})
    component.compute_thread.shutdown()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000, help="sequential calls per round (default 20000)")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds per variant (default 9)")
    parser.add_argument("--out", default=None, help="also write the JSON here")
    parser.add_argument("--json", action="store_true", help="table to stderr, only JSON on stdout")
    args = parser.parse_args()
    rows = asyncio.run(measure(args.calls, args.rounds))
    payload: dict[str, Any] = {"benchmark": "bench_call_shape", "calls": args.calls, "rounds": args.rounds,
                               "rows": rows}
    if args.out:
        payload = write_json(args.out, payload)
    emit(payload, ["method", "direct µs/call", "LocalHandle µs/call", "extra µs", "ratio"],
         [[r["method"], r["direct_us"], r["local_handle_us"], r["extra_us"], r["ratio"]] for r in rows],
         json_only=args.json)


if __name__ == "__main__":
    main()

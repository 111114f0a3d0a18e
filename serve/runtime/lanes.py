"""Forward lanes: the forward batches of one call run on several threads at once (process-wide).

One forward pass on ``T`` intra-op threads stops at every op's barrier for its slowest thread, so a
thread that the scheduler preempts (on a small machine: a request handler, a client) stalls all
``T``. ``L`` lanes of ``T / L`` threads each run ``L`` batches at once, and a preempted thread delays
only its own batch. MiniLM cross-encoder, 20 TREC pairs per call, 2 cores, traced forward: one lane
of 2 threads 49.9 pairs/s, two lanes of 1 thread 63.7; next to a process spinning one core, 28.7
against 38.6.

A call of one batch gains nothing from lanes and loses latency on fewer threads (1 pair: 17.7 ms
on 2 threads, 28.1 on 1), so it runs on the *wide lane*: one thread with every lane's threads.
Every forward batch of :func:`serve.runtime.batching.run_batched` runs on a lane or the wide lane
once lanes are set, chosen by the call's own batch plan, so a request's scores never depend on
which thread ran it or on other traffic: every lane has the same thread count, and a batch's rows
and padding do not depend on the lanes.
Like torch's thread count, the setting is per process; the serving layer sets it in each model
replica (``deployments.<model>.forward_lanes``), library callers run in their own thread (no lanes).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import torch

log = logging.getLogger(__name__)

_lanes: ThreadPoolExecutor | None = None
_wide: ThreadPoolExecutor | None = None  # one thread with every lane's threads: calls of one batch
_shape: tuple[int, int] | None = None  # (lanes, threads per lane)


def _pool(workers: int, threads: int, name: str) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(workers, thread_name_prefix=name, initializer=torch.set_num_threads, initargs=(threads,))


def use_forward_lanes(lanes: int, threads_per_lane: int) -> None:
    """Run forward batches on ``lanes`` threads with ``threads_per_lane`` torch intra-op threads
    each, from now on in this process (a call of one batch: on one thread with ``lanes ×
    threads_per_lane``); ``lanes`` 1 runs them in the calling thread again."""
    global _lanes, _wide, _shape
    if lanes < 1 or threads_per_lane < 1:
        raise ValueError(f"lanes ({lanes}) and threads per lane ({threads_per_lane}) must be ≥ 1")
    if _shape == (lanes, threads_per_lane):
        return
    if _lanes is not None and _wide is not None:
        log.warning("forward lanes change from %s to %s", _shape, (lanes, threads_per_lane))
        _lanes.shutdown(wait=True)
        _wide.shutdown(wait=True)
    _lanes, _wide, _shape = None, None, None
    if lanes > 1:
        _lanes = _pool(lanes, threads_per_lane, "steadyrank-lane")
        _wide = _pool(1, lanes * threads_per_lane, "steadyrank-wide-lane")
        _shape = (lanes, threads_per_lane)


def forward_pool(batches: int) -> ThreadPoolExecutor | None:
    """Where a call of ``batches`` forward batches runs: several → the lanes, at once; one → the
    wide lane (a lone batch would leave the other lanes idle; which pool runs a call depends on its
    own batch plan only, so its scores do not depend on other traffic); None without lanes (the
    calling thread)."""
    return _wide if batches == 1 else _lanes


def lane_count() -> int:
    """How many forward batches run at once (1 without lanes)."""
    return _shape[0] if _shape is not None else 1


def start_lanes() -> list[int]:
    """Start every lane thread and the wide lane now, from the calling thread (whose nice value
    they inherit), and return their kernel thread ids (empty without lanes)."""
    if _lanes is None or _wide is None or _shape is None:
        return []
    barrier = threading.Barrier(_shape[0])  # each task waits for all: one task per lane thread

    def native_id() -> int:
        barrier.wait()
        return threading.get_native_id()

    lanes = [f.result() for f in [_lanes.submit(native_id) for _ in range(_shape[0])]]
    return [*lanes, _wide.submit(threading.get_native_id).result()]

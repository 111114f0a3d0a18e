"""Forward lanes: the forward batches of one call run on several threads at once (process-wide).

One forward pass on ``T`` intra-op threads stops at every op's barrier for its slowest thread, so a
thread that the scheduler preempts (on a small machine: a request handler, a client) stalls all
``T``. ``L`` lanes of ``T / L`` threads each run ``L`` batches at once, and a preempted thread delays
only its own batch. MiniLM cross-encoder, 20 TREC pairs per call, 2 cores, traced forward: one lane
of 2 threads 49.9 pairs/s, two lanes of 1 thread 63.7; next to a process spinning one core, 28.7
against 38.6.

Every forward batch of :func:`serve.runtime.batching.run_batched` runs on a lane once lanes are set
(even a call of one batch), so a request's scores never depend on which thread ran it: every lane
has the same thread count, and a batch's rows and padding do not depend on the lanes.
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
_shape: tuple[int, int] | None = None  # (lanes, threads per lane)


def use_forward_lanes(lanes: int, threads_per_lane: int) -> None:
    """Run forward batches on ``lanes`` threads with ``threads_per_lane`` torch intra-op threads
    each, from now on in this process; ``lanes`` 1 runs them in the calling thread again."""
    global _lanes, _shape
    if lanes < 1 or threads_per_lane < 1:
        raise ValueError(f"lanes ({lanes}) and threads per lane ({threads_per_lane}) must be ≥ 1")
    if _shape == (lanes, threads_per_lane):
        return
    if _lanes is not None:
        log.warning("forward lanes change from %s to %s", _shape, (lanes, threads_per_lane))
        _lanes.shutdown(wait=True)
    _lanes, _shape = None, None
    if lanes > 1:
        _lanes = ThreadPoolExecutor(lanes, thread_name_prefix="steadyrank-lane",
                                    initializer=torch.set_num_threads, initargs=(threads_per_lane,))
        _shape = (lanes, threads_per_lane)


def forward_lanes() -> ThreadPoolExecutor | None:
    """The lanes set by :func:`use_forward_lanes`, or None (run in the calling thread)."""
    return _lanes


def lane_count() -> int:
    """How many forward batches run at once (1 without lanes)."""
    return _shape[0] if _shape is not None else 1


def start_lanes() -> list[int]:
    """Start every lane thread now, from the calling thread (whose nice value they inherit), and
    return their kernel thread ids (empty without lanes)."""
    if _lanes is None or _shape is None:
        return []
    barrier = threading.Barrier(_shape[0])  # each task waits for all: one task per lane thread

    def native_id() -> int:
        barrier.wait()
        return threading.get_native_id()

    return [f.result() for f in [_lanes.submit(native_id) for _ in range(_shape[0])]]

"""Forward lanes: the forward batches of one call run on several threads at once (process-wide).

One forward pass on ``T`` intra-op threads stops at every op's barrier for its slowest thread, so a
thread that the scheduler preempts (on a small machine: a request handler, a client) stalls all
``T``. ``L`` lanes of ``T / L`` threads each run ``L`` batches at once, and a preempted thread delays
only its own batch. MiniLM cross-encoder, 20 TREC pairs per call, 2 cores, traced forward: one lane
of 2 threads 49.9 pairs/s, two lanes of 1 thread 63.7; next to a process spinning one core, 28.7
against 38.6.

A call of one batch gains nothing from lanes and loses latency on fewer threads (1 pair: 17.7 ms
on 2 threads, 28.1 on 1), so it runs in the calling thread, which :func:`start_lanes` gives every
lane's threads. Which threads run a call depends on the call's own batch plan only, so a request's
scores never depend on other traffic: every lane has the same thread count, and a batch's rows
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
_shape: tuple[int, int] | None = None  # (lanes, threads per lane)


def pin_threads(threads: int) -> None:
    """Give the calling thread ``threads`` torch intra-op threads for good. torch keeps one count
    per process and copies it into a thread's OpenMP setting at that thread's first parallel op,
    so a count set here could be overwritten by whatever another thread set last; reading the
    count first does that first-op copy now, and the set after it stays this thread's."""
    torch.get_num_threads()
    torch.set_num_threads(threads)


def use_forward_lanes(lanes: int, threads_per_lane: int) -> None:
    """Run forward batches on ``lanes`` threads with ``threads_per_lane`` torch intra-op threads
    each, from now on in this process; ``lanes`` 1 runs them in the calling thread again. A call
    of one batch runs in the calling thread: give it ``lanes × threads_per_lane`` threads
    (:func:`start_lanes` does, on the thread it runs on)."""
    global _lanes, _shape
    if lanes < 1 or threads_per_lane < 1:
        raise ValueError(f"lanes ({lanes}) and threads per lane ({threads_per_lane}) must be ≥ 1")
    if _shape == (lanes, threads_per_lane):
        return
    if _lanes is not None:
        log.warning("forward lanes change from %s to %s", _shape, (lanes, threads_per_lane))
        _lanes.shutdown(wait=True)
    _lanes = None
    if lanes > 1:
        _lanes = ThreadPoolExecutor(lanes, thread_name_prefix="steadyrank-lane",
                                    initializer=pin_threads, initargs=(threads_per_lane,))
    _shape = (lanes, threads_per_lane)


def forward_pool(batches: int) -> ThreadPoolExecutor | None:
    """Where a call of ``batches`` forward batches runs: several → the lanes, at once; one or no
    lanes → None, the calling thread (a lone batch would leave the other lanes idle; which one runs
    a call depends on its own batch plan only, so its scores do not depend on other traffic)."""
    return _lanes if batches > 1 else None


def lane_shape() -> tuple[int, int]:
    """``(lanes, threads per lane)`` as set by :func:`use_forward_lanes`; before it, one lane on
    torch's current thread count."""
    return _shape if _shape is not None else (1, torch.get_num_threads())


def start_lanes() -> list[int]:
    """On the thread that will make the forward calls: give it every lane's threads (for calls of
    one batch; without lanes, for every call), start every lane thread now from it (they inherit
    its nice value), and return the lanes' kernel thread ids (empty without lanes or before
    :func:`use_forward_lanes`)."""
    if _shape is None:
        return []
    pin_threads(_shape[0] * _shape[1])
    if _lanes is None:
        return []
    barrier = threading.Barrier(_shape[0])  # each task waits for all: one task per lane thread

    def native_id() -> int:
        barrier.wait()
        return threading.get_native_id()

    return [f.result() for f in [_lanes.submit(native_id) for _ in range(_shape[0])]]

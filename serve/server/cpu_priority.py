"""CPU priority inside a model-holding replica: forward passes first, everything else behind them.

Under overload a replica answers many cheap refusals (503) while its model computes. On a small
machine that answering competed with the forward pass as an equal: in a 128-client storm of
clients that retry a 503 at once, the Serve proxy and the replica's event loop took enough of
the two cores that the model's OpenMP team (one thread per core, which waits at every barrier for
its slowest member) and its GIL hand-offs stalled, and goodput fell from 45 to ~1.3 documents/s.

Linux schedules threads, and gives each its own nice value. So :func:`favour_compute` leaves the
replica's compute threads (the compute thread, its forward lanes, and the threads they start
later: their OpenMP teams, the tokenizer's pool)
at the process' priority and raises the nice value of every other thread of the process to
``niceness``: the event loop, Ray's threads, the threads they start later (a new thread inherits
its creator's nice value). :func:`renice_local_proxies` does the same to the Serve proxy
processes of this machine. At nice 19 a thread weighs 15 against a nice-0 thread's 1024
(CFS), so while both cores compute, request handling gets ~1.5 % of them; when the model is idle
it gets all it wants, so latency at low load is unchanged. Raising a nice value needs no
privilege. Ray starts worker processes at nice 15 unless ``RAY_worker_niceness`` says otherwise
(:mod:`serve.launcher.ray_env` sets 0, so the compute thread can stand above the rest).
:func:`favour_compute` also shortens the GIL switch interval (:data:`GIL_SWITCH_INTERVAL_S`).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Collection
from pathlib import Path

logger = logging.getLogger(__name__)

PROXY_TITLE = "ray::ProxyActor"
#: Python's GIL hand-off interval in a replica that favours its compute thread (default 5 ms).
#: A low-priority thread that holds the GIL when the scheduler preempts it keeps the compute thread
#: waiting, at each of the hundreds of times an eager forward pass re-takes the GIL, for up to this
#: long: 0.5 ms instead of 5 raised 128-client goodput from ~30 to ~37 documents/s on 2 cores.
GIL_SWITCH_INTERVAL_S = 0.0005


def thread_ids(pid: int | str = "self") -> list[int]:
    """The kernel thread ids of a process (``/proc/<pid>/task``; empty when it is gone)."""
    try:
        return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def raise_niceness(tid: int, niceness: int) -> bool:
    """Set thread ``tid``'s nice value to ``niceness`` unless it is already at least that; False
    when the thread is gone or may not be changed."""
    try:
        if os.getpriority(os.PRIO_PROCESS, tid) < niceness:
            os.setpriority(os.PRIO_PROCESS, tid, niceness)
        return True
    except OSError:
        return False


def enabled(niceness: int) -> bool:
    """Whether a ``niceness`` setting asks for anything (> 0) on a system with per-thread nice
    values (Linux)."""
    return niceness > 0 and sys.platform.startswith("linux")


def raise_threads(tids: list[int], niceness: int) -> int:
    """:func:`raise_niceness` on each of ``tids``; returns how many are now at ``niceness`` or above."""
    return sum(raise_niceness(tid, niceness) for tid in tids)


def favour_compute(compute_tids: Collection[int], niceness: int) -> int:
    """Raise every thread of this process but ``compute_tids`` to ``niceness`` and set the GIL switch
    interval to :data:`GIL_SWITCH_INTERVAL_S`; returns how many threads were changed or already
    there. ``niceness`` 0 does nothing (the feature is off)."""
    if not enabled(niceness):
        return 0
    done = raise_threads([tid for tid in thread_ids() if tid not in compute_tids], niceness)
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    logger.info("compute threads %s keep their priority; %d other threads at nice %d",
                sorted(compute_tids), done, niceness)
    return done


def local_proxy_pids(uid: int | None = None) -> list[int]:
    """Processes of this machine, owned by ``uid`` (default: this user), whose title is Ray
    Serve's HTTP proxy actor."""
    uid = os.getuid() if uid is None else uid
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            title = (entry / "cmdline").read_bytes().split(b"\0", 1)[0].decode("utf-8", "replace")
        except OSError:
            continue
        if title.startswith(PROXY_TITLE):
            found.append(int(entry.name))
    return found


def renice_local_proxies(niceness: int) -> int:
    """Raise every thread of this machine's Serve proxies to ``niceness``; returns the count of
    threads set. 0 does nothing."""
    if not enabled(niceness):
        return 0
    done = raise_threads([tid for pid in local_proxy_pids() for tid in thread_ids(pid)], niceness)
    logger.info("%d Serve proxy threads at nice %d", done, niceness)
    return done

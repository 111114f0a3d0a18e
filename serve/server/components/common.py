"""What every component shares: the one compute thread, per-job isolation in a
batch, torch thread settings and batch options applied through Ray Serve's ``user_config``."""

from __future__ import annotations

import asyncio
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from steadyrank.serve.errors import DeadlineExceeded
from steadyrank.serve.server.admission.deadline import Ticket
from steadyrank.serve.server.admission.shadow import ShadowGate
from steadyrank.serve.server.memory import trim_freed_memory


def count_drop(recorder: Any, label: str, reason: str) -> None:
    recorder.inc("steadyrank_requests_dropped_total", deployment=label, reason=reason)


async def admitted(batched: Any, job: Any, ticket: Ticket, recorder: Any, label: str) -> Any:
    """Queue ``(job, ticket)`` on a :class:`~serve.server.components.batcher.RequestBatcher` and
    await its result (:class:`~serve.server.admission.deadline.Ticket`: the deadline drops). A job
    whose deadline passed is refused here; a caller cancelled while its job
    is still queued marks the ticket, so the batch drops the job unscored (counted once, here)."""
    reason = ticket.drop_reason()
    if reason is not None:
        count_drop(recorder, label, reason)
        raise DeadlineExceeded("the request's deadline passed before it reached the model")
    try:
        return unwrap(await batched((job, ticket)))
    except asyncio.CancelledError:
        if not ticket.started:
            ticket.cancelled = True
            count_drop(recorder, label, ticket.drop_reason() or "disconnected")
        raise


@dataclass
class Failed:
    """One job of a batch failed; the others are unaffected."""

    error: BaseException


_COMPUTE: ThreadPoolExecutor | None = None


def model_executor(background_niceness: int = 0) -> ThreadPoolExecutor:
    """The process's one thread for model (and FAISS) calls, shared by every component in it: calls
    run one at a time (batching provides the concurrency; a call's forward batches may run on the
    forward lanes, :func:`set_compute_threads`), so there are never more busy torch threads than
    the replica's ``torch_threads`` (in the colocated layout both models and the index live in one
    process).

    The first call inside a Ray Serve replica, with ``background_niceness`` > 0
    (``deployments.background_niceness``), starts the thread and the lanes and raises every *other*
    thread of the process to that nice value (:func:`serve.server.cpu_priority.favour_compute`)."""
    global _COMPUTE
    if _COMPUTE is None:
        _COMPUTE = ThreadPoolExecutor(max_workers=1, thread_name_prefix="steadyrank-compute")
        compute_tids = _COMPUTE.submit(_start_compute_threads).result()
        if background_niceness > 0 and in_replica():
            from steadyrank.serve.server.cpu_priority import favour_compute

            favour_compute(compute_tids, background_niceness)
    return _COMPUTE


def _start_compute_threads() -> list[int]:
    """Run on the compute thread: give it the lanes' threads and start the forward lanes from it
    (:func:`serve.runtime.lanes.start_lanes`); the kernel thread ids of the compute thread and of
    every lane."""
    lanes = sys.modules.get("steadyrank.serve.runtime.lanes")  # not imported: no lanes, and no torch to load
    return [threading.get_native_id(), *(lanes.start_lanes() if lanes is not None else [])]


def in_replica() -> bool:
    """Whether this code runs inside a Ray Serve replica (not a test process or a CLI)."""
    from ray import serve
    from ray.serve.exceptions import RayServeException

    try:
        serve.get_replica_context()
    except RayServeException:
        return False
    return True


async def run_in(executor: ThreadPoolExecutor, fn: Any, *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(executor, fn, *args)


async def shadow_turn(gate: ShadowGate, recorder: Any, label: str, executor: ThreadPoolExecutor,
                      fn: Any, *args: Any) -> Any:
    """Run ``fn(*args)`` (shadow work) on the compute thread once ``gate`` gives shadow work its
    turn (:class:`~serve.server.admission.shadow.ShadowGate`); the wait, in seconds, is observed in
    ``steadyrank_shadow_wait_seconds{deployment=label}``."""
    waited = await gate.turn()
    recorder.observe("steadyrank_shadow_wait_seconds", waited, deployment=label)
    return await run_in(executor, fn, *args)


_DEFAULT_THREADS: int | None = None  # torch's thread count before the first set_compute_threads


def set_compute_threads(threads: int | None, lanes: int) -> None:
    """This process' torch threads: ``threads`` in all (unset: torch's count at the first call,
    Ray's default ≈ the replica's CPUs) as ``min(lanes, threads)`` forward lanes of
    ``threads // lanes`` intra-op threads each (:mod:`serve.runtime.lanes`; one lane: the forward
    runs on the compute thread itself)."""
    import torch

    from steadyrank.serve.runtime.lanes import use_forward_lanes

    global _DEFAULT_THREADS
    if _DEFAULT_THREADS is None:
        _DEFAULT_THREADS = torch.get_num_threads()
    total = threads or _DEFAULT_THREADS
    count = min(lanes, total)
    torch.set_num_threads(total // count)
    use_forward_lanes(count, total // count)


def run_isolated(jobs: list[Any], run: Any) -> list[Any]:
    """``run(jobs)`` for the whole batch; if it fails, each job alone, so one bad job fails alone."""
    try:
        return run(jobs)
    except Exception as exc:  # noqa: BLE001
        if len(jobs) == 1:
            return [Failed(exc)]
    out = []
    for job in jobs:
        try:
            out.append(run([job])[0])
        except Exception as exc:  # noqa: BLE001
            out.append(Failed(exc))
    return out


async def run_batch(executor: ThreadPoolExecutor, jobs: list[tuple[Any, Ticket]], run: Any, recorder: Any,
                    label: str) -> list[Any]:
    """Run the live jobs of a batch in one ``run`` on ``executor`` (isolated, :func:`run_isolated`);
    a job whose deadline passed or whose caller gave up is dropped before the forward pass and
    counted in ``steadyrank_requests_dropped_total{deployment=label, reason}``. The memory the
    forward passes freed then goes back to the OS (:func:`serve.server.memory.trim_freed_memory`, ~0.5
    ms) as the executor's next task: after the answers, before the next batch."""
    out: list[Any] = [None] * len(jobs)
    live = []
    for i, (_, ticket) in enumerate(jobs):
        reason = ticket.drop_reason()
        if reason is None:
            ticket.started = True
            live.append(i)
        else:
            if not ticket.cancelled:  # a cancelled job was counted when its caller gave up
                count_drop(recorder, label, reason)
            out[i] = Failed(DeadlineExceeded(f"dropped before the forward pass ({reason})"))
    if live:
        try:
            results = await run_in(executor, run_isolated, [jobs[i][0] for i in live], run)
        finally:
            executor.submit(trim_freed_memory)
        for i, result in zip(live, results, strict=True):
            out[i] = result
    return out


def unwrap(outcome: Any) -> Any:
    if isinstance(outcome, Failed):
        raise outcome.error
    return outcome


def apply_batch_config(batched: Any, config: dict[str, Any]) -> None:
    """Set a :class:`~serve.server.components.batcher.RequestBatcher`'s limits from a deployment's
    ``user_config`` (``max_batch_size``, ``batch_wait_timeout_s``; see
    ``BatchedDeploymentSettings.ray_options``)."""
    batched.set_max_batch_size(int(config["max_batch_size"]))
    batched.set_batch_wait_timeout_s(float(config["batch_wait_timeout_s"]))

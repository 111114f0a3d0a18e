"""What every deployment shares: the refusal type, the one compute thread, per-job isolation in a
batch, torch thread settings and batch options applied through Ray Serve's ``user_config``."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from steadyrank.serve.runtime.errors import check_texts


class InvalidRequest(ValueError):
    """A request a deployment refuses (HTTP 400 at the ingress)."""


@dataclass
class Failed:
    """One job of a batch failed; the others are unaffected."""

    error: BaseException


def model_executor() -> ThreadPoolExecutor:
    """One thread for a replica's model (or FAISS) calls: forward passes run one at a time (batching
    provides the concurrency), and OpenMP keeps a single thread team instead of one per pool thread
    (several spinning teams would fight for the cores)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="steadyrank-compute")


async def run_in(executor: ThreadPoolExecutor, fn: Any, *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(executor, fn, *args)


def set_torch_threads(threads: int | None) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)


def check_text_list(texts: Any, what: str) -> list[str]:
    """A handle caller's texts: a list or tuple of strings (``check_texts`` checks the items)."""
    if not isinstance(texts, (list, tuple)):
        raise InvalidRequest(f"{what} must be a list of strings")
    return check_texts(texts, what)


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


def unwrap(outcome: Any) -> Any:
    if isinstance(outcome, Failed):
        raise outcome.error
    return outcome


def apply_batch_config(batched: Any, config: dict[str, Any]) -> None:
    """Set a ``@serve.batch`` method's limits from a deployment's ``user_config``
    (``max_batch_size``, ``batch_wait_timeout_s``; see ``BatchedDeploymentSettings.ray_options``)."""
    batched.set_max_batch_size(int(config["max_batch_size"]))
    batched.set_batch_wait_timeout_s(float(config["batch_wait_timeout_s"]))

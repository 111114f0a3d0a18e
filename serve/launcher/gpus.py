"""GPUs against devices: what ``steadyrank serve`` (and ``--check``) reports before anything starts.

A model's ``device`` and its deployment's ``num_gpus`` cannot disagree silently: Ray hides every GPU
from a replica that reserves none, so ``device: cuda`` there fails at replica start and ``auto`` runs
on CPU. :class:`~serve.settings.Settings` derives an unset ``num_gpus`` from the device (and
refuses a ``cuda:N`` its replica cannot see); this module adds what needs the host: the GPUs the
deployments reserve against the GPUs this machine has (an error), and the silent cases (warnings).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from steadyrank.serve.settings import Settings, SettingsError


def host_gpus(environ: dict[str, str] | None = None, dev: Path = Path("/dev")) -> int:
    """GPUs a process on this host may use: the entries of ``CUDA_VISIBLE_DEVICES`` when it is set,
    else the NVIDIA device files ``/dev/nvidia<N>`` (no CUDA runtime loaded)."""
    env = os.environ if environ is None else environ
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and not d.strip().startswith("-")])
    return sum(1 for p in dev.glob("nvidia[0-9]*") if p.name.removeprefix("nvidia").isdigit())


def gpu_report(settings: Settings, local: bool, gpus: int | None = None) -> list[str]:
    """Warnings about GPUs a model will not use; a :class:`SettingsError` when ``local`` (a Ray
    instance started on this host) and the deployments reserve more GPUs than the host has
    (``gpus``, default :func:`host_gpus`)."""
    have = host_gpus() if gpus is None else gpus
    d = settings.deployments
    warnings = []
    needed = 0.0
    for name, model, deployment in settings.model_deployments():
        reserved = d.replica_gpus(name, canary=settings.canary is not None, evaluator=settings.quality.enabled)
        where = "the colocated replica" if d.layout == "colocated" else f"deployments.{name}"
        if model.device == "auto" and reserved == 0 and have > 0:
            warnings.append(f"{name}: device auto, but {where} reserves no GPU, so Ray hides this host's {have} GPU(s) "
                            f"and it runs on CPU: set device: cuda (num_gpus is derived from it) or device: cpu")
        if model.device == "cpu" and (deployment.num_gpus or 0) > 0:
            warnings.append(f"{name}: device cpu, but deployments.{name}.num_gpus is {deployment.num_gpus:g}: "
                            "it reserves GPUs it never uses")
        if d.layout == "split":
            replicas = deployment.autoscaling.min_replicas if deployment.autoscaling else deployment.num_replicas
            needed += (deployment.num_gpus or 0) * max(replicas, 1)
    if d.layout == "colocated":
        needed = d.replica_gpus("ingress", canary=settings.canary is not None, evaluator=settings.quality.enabled)
    if local and math.ceil(needed - 1e-9) > have:
        raise SettingsError(
            f"settings: deployments reserve {needed:g} GPU(s) but this host has {have} "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}): the replicas would never start; "
            "set the models' device: cpu, or run where the GPUs are")
    return warnings

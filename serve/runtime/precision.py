"""What ``precision: auto`` runs, and the checks on an explicit precision.

``auto`` is resolved once, at load, from the device the model runs on:

- CUDA: ``bf16`` when the GPU computes BF16 natively (``torch.cuda.is_bf16_supported``, Ampere and
  later), else ``fp32``;
- CPU: ``bf16`` when the CPU has a BF16 matrix or dot-product unit — the ``amx_bf16`` (AMX tiles) or
  ``avx512_bf16`` flag of ``/proc/cpuinfo`` (or torch's own probe where that file does not exist) —
  else ``fp32``: without those units a BF16 forward is emulated and slower than FP32.

Scoring stays what the settings say (HPS by default: φ in FP32), so ``auto`` changes speed and the
forward's rounding, never the FP32 scoring. ``int8`` (dynamic int8 ``Linear`` layers, activations
and outputs in FP32) runs on a CPU with the transformers backend only.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from steadyrank.serve.errors import UnsupportedModelError
from steadyrank.serve.runtime.settings import ModelSettings

ForwardPrecision = Literal["fp32", "bf16", "fp16", "int8"]

#: CPU flags (as ``/proc/cpuinfo`` spells them) of units that compute BF16 natively, best first.
CPU_BF16_FLAGS = ("amx_bf16", "avx512_bf16")
#: CPU flags of units that compute int8 dot products (used by the int8 ``Linear`` kernels).
CPU_INT8_FLAGS = ("amx_int8", "avx512_vnni", "avx_vnni")


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision a model runs in: what was asked, what runs, and why (one line)."""

    requested: str
    precision: ForwardPrecision
    reason: str

    def facts(self) -> dict[str, str]:
        """The choice as model facts (``/v1/models``): ``{"requested", "precision", "reason"}``."""
        return {"requested": self.requested, "precision": self.precision, "reason": self.reason}

    def line(self) -> str:
        """``auto → bf16 (…reason…)`` or ``bf16 (…reason…)``: the start line's words."""
        head = f"{self.requested} → {self.precision}" if self.requested != self.precision else self.precision
        return f"{head} ({self.reason})"


def parse_cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The union of the ``flags`` lines of a ``/proc/cpuinfo`` text (x86); empty when none."""
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("flags", "Features"):
            flags.update(value.split())
    return frozenset(flags)


@functools.cache
def cpu_flags() -> frozenset[str]:
    """This machine's CPU flags: ``/proc/cpuinfo``, or where it cannot be read, the flags torch's
    probes confirm (``torch._C._cpu``: AMX tiles with BF16, AVX512-BF16, VNNI)."""
    try:
        return parse_cpu_flags(Path("/proc/cpuinfo").read_text())
    except OSError:
        return _torch_cpu_flags()


def _torch_cpu_flags() -> frozenset[str]:
    import torch

    probes = {"amx_bf16": "_is_amx_tile_supported", "avx512_bf16": "_is_avx512_bf16_supported",
              "avx512_vnni": "_is_avx512_vnni_supported"}
    cpu = getattr(torch._C, "_cpu", None)
    return frozenset(flag for flag, probe in probes.items() if cpu is not None and getattr(cpu, probe, lambda: False)())


def cpu_bf16_unit(flags: frozenset[str]) -> str | None:
    """The first flag of :data:`CPU_BF16_FLAGS` present in ``flags`` (None: BF16 is emulated)."""
    return next((f for f in CPU_BF16_FLAGS if f in flags), None)


def cpu_int8_unit(flags: frozenset[str]) -> str | None:
    """The first flag of :data:`CPU_INT8_FLAGS` present in ``flags`` (None: int8 dot products run on
    plain AVX2/AVX-512 integer instructions)."""
    return next((f for f in CPU_INT8_FLAGS if f in flags), None)


def int8_engine(flags: frozenset[str], supported: tuple[str, ...] | list[str]) -> str:
    """torch's quantised engine that packs the int8 ``Linear`` weights: ``onednn`` on a CPU with
    AMX-INT8 (its kernels use the AMX tiles; torch's default ``x86`` engine sends dynamic ``Linear``
    to FBGEMM's VNNI kernels), else ``x86``; ``supported`` is ``torch.backends.quantized.supported_engines``.

    Measured on 2 AMX cores (``bench_cpu_precision.py``, MiniLM cross-encoder, 20 TREC passages per
    request): a 1200 × 384 × 1536 dynamic int8 Linear on one thread 0.95 TOP/s under ``onednn``
    against 0.43 under ``x86``; 145.8 against 109.7 docs/s for the whole model.
    """
    return "onednn" if "amx_int8" in flags and "onednn" in supported else "x86"


def choose(requested: str, device_type: str, *, flags: frozenset[str] = frozenset(), cuda_bf16: bool = False,
           backend: str = "transformers") -> PrecisionChoice:
    """Resolve ``requested`` (``auto`` or a forward precision) for ``device_type`` (``cpu`` | ``cuda``).

    ``flags``: the CPU's flags (:func:`cpu_flags`); ``cuda_bf16``: the GPU computes BF16 natively.
    Refuses int8 on CUDA or on another backend than transformers (:class:`UnsupportedModelError`).
    """
    if requested == "auto":
        if device_type == "cuda":
            if cuda_bf16:
                return PrecisionChoice("auto", "bf16", "CUDA device with native BF16")
            return PrecisionChoice("auto", "fp32", "CUDA device without native BF16")
        unit = cpu_bf16_unit(flags)
        if unit is not None:
            return PrecisionChoice("auto", "bf16", f"CPU has {unit.upper().replace('_', '-')}")
        return PrecisionChoice("auto", "fp32", "CPU has no AMX-BF16 or AVX512-BF16: BF16 would be emulated")
    if requested == "int8":
        if device_type != "cpu":
            raise UnsupportedModelError(
                f"precision int8 runs on a CPU only (dynamic int8 Linear layers); on {device_type} use bf16 or fp16")
        if backend != "transformers":
            raise UnsupportedModelError(f"precision int8 needs the transformers backend, not {backend!r}")
        unit = cpu_int8_unit(flags)
        kernels = " (oneDNN)" if unit == "amx_int8" else ""
        return PrecisionChoice("int8", "int8", f"dynamic int8 Linear on {unit.upper().replace('_', '-')}{kernels}"
                               if unit else "dynamic int8 Linear without VNNI/AMX-INT8 (slow)")
    if requested not in ("fp32", "bf16", "fp16"):
        raise UnsupportedModelError(f"unknown precision {requested!r}: use auto, fp32, bf16, fp16 or int8")
    return PrecisionChoice(requested, requested, "set in the settings")  # type: ignore[arg-type]


def gpu_driver_present() -> bool:
    """An NVIDIA or AMD GPU driver is loaded (``/dev/nvidiactl`` or ``/dev/kfd``): only then can
    ``device: auto`` mean CUDA, and only then is torch imported to ask (the server's driver process
    stays torch-free on a CPU machine)."""
    return Path("/dev/nvidiactl").exists() or Path("/dev/kfd").exists()


@dataclass(frozen=True)
class DeviceFacts:
    """What a precision choice reads of the device a settings ``device`` resolves to on this machine."""

    device_type: str  # "cpu" | "cuda"
    flags: frozenset[str]  # the CPU's flags (empty on CUDA)
    cuda_bf16: bool  # the GPU computes BF16 natively


def device_facts(device: str) -> DeviceFacts:
    """:class:`DeviceFacts` for a settings ``device`` (``auto`` | ``cpu`` | ``cuda``) on this machine
    (torch-free on a CPU machine)."""
    if device == "cpu" or (device == "auto" and not gpu_driver_present()):
        return DeviceFacts("cpu", cpu_flags(), False)
    import torch

    from steadyrank.serve.runtime.loading import resolve_device

    device_type = resolve_device(device).type
    cuda_bf16 = device_type == "cuda" and bool(torch.cuda.is_bf16_supported())
    return DeviceFacts(device_type, cpu_flags() if device_type == "cpu" else frozenset(), cuda_bf16)


def choose_for(requested: str, device: str, backend: str = "transformers") -> PrecisionChoice:
    """:func:`choose` for a settings ``device`` (``auto`` | ``cpu`` | ``cuda``) on this machine."""
    facts = device_facts(device)
    return choose(requested, facts.device_type, flags=facts.flags, cuda_bf16=facts.cuda_bf16, backend=backend)


def resolve(settings: ModelSettings) -> tuple[ModelSettings, PrecisionChoice]:
    """``settings`` with ``precision`` resolved on this machine (:func:`choose_for`), and the choice
    (``auto`` → ``bf16`` or ``fp32``; an explicit precision is kept, or refused where it cannot run)."""
    choice = choose_for(settings.precision, settings.device, settings.backend)
    return settings.model_copy(update={"precision": choice.precision}), choice


def resolved_precision(settings: ModelSettings) -> ForwardPrecision:
    """The forward precision of settings :func:`resolve` returned (a backend's; ``auto`` is a bug here)."""
    precision = settings.precision
    if precision == "auto":
        raise ValueError("precision 'auto' reached a backend unresolved: load through resolve(settings)")
    return precision


def precision_on_this_machine(settings: ModelSettings) -> ForwardPrecision:
    """The precision ``settings`` run in here (``auto`` resolved; torch-free on a CPU machine)."""
    return choose_for(settings.precision, settings.device, settings.backend).precision

"""Encoder forward passes as TorchScript traces, accepted only when bitwise equal to eager.

Why: an eager forward of a Hugging Face encoder re-enters the Python interpreter for every module
and op, so it takes the GIL back hundreds of times per batch and waits up to the switch interval
each time another thread (the replica's event loop answering requests) holds it. The TorchScript
interpreter runs the whole graph in C++ without the GIL. Measured in process on 20 TREC pairs,
MiniLM cross-encoder, 1 torch thread, next to a busy Python thread: eager 1,267 ms against 559 ms
alone; the trace 546 ms.

A trace records one path through the Python code; a model whose code branches on shapes or values
could give a trace that is wrong for other inputs. So a trace is built from the first probe and
kept only if, for every probe (different rows, widths, with and without padding), its output equals
eager's bit for bit, run ``_VERIFY_RUNS`` times so the profiling executor's optimised graph is the
one checked. Otherwise the caller keeps the eager forward. CPU only: on CUDA the TorchScript fuser
may fuse elementwise ops and change rounding.

``torch.jit`` is deprecated in favour of ``torch.compile``/``torch.export``; neither frees the GIL
without a C++ toolchain at load time, so the trace stays until torch removes it, and any failure to
trace falls back to eager.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch

log = logging.getLogger(__name__)

Inputs = dict[str, torch.Tensor]
_VERIFY_RUNS = 3  # > torch._C._jit_get_num_profiled_runs() (1): the optimised graph runs at least twice


class _FieldOf(torch.nn.Module):
    """A Hugging Face model seen as ``tensors → tensor``: keyword inputs ``names`` given positionally,
    one output field (``logits`` or ``last_hidden_state``) returned (tracing needs tensors in and out)."""

    def __init__(self, model: torch.nn.Module, names: Sequence[str], field: str) -> None:
        super().__init__()
        self.model = model
        self.names = tuple(names)
        self.field = field

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        return getattr(self.model(**dict(zip(self.names, tensors, strict=True))), self.field)


def trace_field(model: torch.nn.Module, field: str, probes: Sequence[Inputs]) -> Callable[[Inputs], torch.Tensor] | None:
    """A traced ``inputs → model(**inputs).<field>``, or ``None`` when tracing fails or any probe's
    output differs from eager's in any bit. Every probe must have the same input names."""
    names = tuple(probes[0])
    eager = _FieldOf(model, names, field)
    try:
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TracerWarning on shape-to-bool; DeprecationWarning of torch.jit
            # cast: torch.jit.trace is unannotated, and the union inferred from its body includes a (Graph, Stack)
            # tuple; tracing a Module gives a callable ScriptModule with the module's forward
            traced = cast(Callable[..., torch.Tensor],
                          torch.jit.trace(eager, tuple(probes[0].values()), strict=False, check_trace=False))
            for probe in probes:
                expected = eager(*probe.values())
                for _ in range(_VERIFY_RUNS):
                    got = traced(*probe.values())
                    if not torch.equal(got, expected):
                        shape = tuple(probe[names[0]].shape)
                        log.warning("traced forward differs from eager at %s: keeping eager", shape)
                        return None
    except Exception as exc:  # noqa: BLE001 - any tracing failure means: run eager
        log.warning("cannot trace the forward (%s: %s): keeping eager", type(exc).__name__, exc)
        return None

    def forward(inputs: Inputs) -> Any:
        if tuple(inputs) != names:
            raise ValueError(f"traced forward takes inputs {names}, got {tuple(inputs)}")
        return traced(*inputs.values())

    return forward

"""Load a local model directory (kind found by :mod:`serve.runtime.inspection`), offline only:
every ``from_pretrained`` call is ``local_files_only``. A Hub id is made a local directory before
(:mod:`serve.runtime.hub`, at settings time), never here.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import torch

from steadyrank.serve.errors import ModelLoadError, UnsupportedModelError
from steadyrank.serve.runtime.inspection import ModelSpec
from steadyrank.serve.runtime.precision import ForwardPrecision, cpu_flags, int8_engine

# int8: the weights load in FP32 and their Linear layers are then quantised (activations stay FP32).
_DTYPES: dict[ForwardPrecision, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16,
                                                "fp16": torch.float16, "int8": torch.float32}
_ENGINE_LOCK = threading.Lock()  # torch's quantised engine is process-wide: one packing at a time


def torch_dtype(precision: ForwardPrecision) -> torch.dtype:
    """The torch dtype of a resolved precision's weights and outputs (int8: FP32 outputs)."""
    return _DTYPES[precision]


def resolve_device(device: str) -> torch.device:
    """``auto`` → CUDA when available, else CPU; ``cuda`` / ``cuda:N`` without that GPU is an error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    chosen = torch.device(device)
    if chosen.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (chosen.index or 0) >= count:
            raise ModelLoadError(f"device {device!r} requested but this process sees {count} CUDA device(s)")
    return chosen


def load_tokenizer(path: Path) -> Any:
    """The directory's tokenizer (local files only)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise ModelLoadError(f"{path}: cannot load the tokenizer: {exc}") from exc


def load_torch_model(spec: ModelSpec, precision: ForwardPrecision, device: torch.device) -> torch.nn.Module:
    """The model of ``spec`` with weights in ``precision`` on ``device``, in eval mode.

    ``int8``: every ``nn.Linear`` becomes a dynamically quantised one (``torch.ao``): weights int8
    per output channel (symmetric), each input row's activations quantised to uint8 per call, the
    int8 × uint8 products summed in int32 and rescaled to FP32, on oneDNN's AMX-INT8 kernels where
    the CPU has them, else FBGEMM's VNNI ones (:func:`serve.runtime.precision.int8_engine`).
    Embeddings, LayerNorm, attention and the outputs stay FP32.
    """
    import transformers

    auto = {
        "bi-encoder": transformers.AutoModel,
        "cross-encoder": transformers.AutoModelForSequenceClassification,
        "causal-lm": transformers.AutoModelForCausalLM,
    }[spec.kind]
    try:
        model = auto.from_pretrained(str(spec.path), dtype=torch_dtype(precision), local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise UnsupportedModelError(f"{spec.path}: cannot load {spec.architecture} as a {spec.kind}: {exc}") from exc
    model = model.to(device).eval()
    if precision == "int8":
        model = quantise_linear_int8(model)
    return model


def quantise_linear_int8(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with its ``nn.Linear`` layers replaced by dynamic int8 ones (per-channel weights),
    packed by :func:`serve.runtime.precision.int8_engine`'s engine. The engine is process-wide in
    torch, so it is set only while packing (the packed weights keep their kernels), under a lock."""
    import warnings

    from torch.ao.quantization import quantize_dynamic
    from torch.ao.quantization.qconfig import per_channel_dynamic_qconfig

    engines = torch.backends.quantized
    with _ENGINE_LOCK, warnings.catch_warnings():  # torch.ao's deprecation notices (torchao is not a dependency)
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        default, engines.engine = engines.engine, int8_engine(cpu_flags(), engines.supported_engines)
        try:
            return quantize_dynamic(model, {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8)
        finally:
            engines.engine = default

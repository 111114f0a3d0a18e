"""ONNX Runtime's int8 path for ``bench_cpu_precision.py``: the cross-encoder exported to ONNX,
its MatMuls quantised dynamically to int8, run by ONNX Runtime inside steadyrank's own scorer.

The export is torch.onnx's TorchScript exporter (opset 17, batch and sequence axes dynamic) of the
FP32 model's ``inputs → logits``; ``onnxruntime.quantization.quantize_dynamic`` then makes every
MatMul with a constant weight a ``DynamicQuantizeMatMul``: weights int8 per output channel
(symmetric), activations uint8 per tensor, their range taken per call; the u8 × s8 products run on
MLAS's VNNI / AMX-INT8 kernels (a single-thread u8s8 GEMM of 1200 × 384 × 1536 measured 1.10 TOP/s
here, against 0.15 for u8 × u8 weights and for FP32: AMX tiles). Attention, GELU, LayerNorm and the
logits stay FP32. Both files are cached under ``--cache-dir`` (written to a temporary name, then
renamed into place).

:func:`ort_int8_scorer` loads the FP32 scorer and swaps its backend's forward for the ONNX Runtime
session, so batching, forward lanes and HPS (φ on FP32 logits) are exactly the runtime's; the
session runs ``threads_per_lane`` intra-op threads in whichever lane thread calls it.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

_NAMES = ("input_ids", "attention_mask", "token_type_ids")


def _atomic(target: Path, write: Any) -> Path:
    """``write(path)`` to a temporary file beside ``target``, renamed to ``target`` (kept if present)."""
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}-", dir=target.parent)
    os.close(handle)
    try:
        write(Path(temporary))
        os.replace(temporary, target)
    finally:
        Path(temporary).unlink(missing_ok=True)
    return target


def export_int8(cross: Path, cache_dir: Path) -> Path:
    """The int8 ONNX file of the cross-encoder folder ``cross`` (exported and quantised once)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder = cache_dir / f"{cross.name}-ort"

    class Logits(torch.nn.Module):
        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    token_type_ids: torch.Tensor) -> torch.Tensor:
            return self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits

    def export(path: Path) -> None:
        model = AutoModelForSequenceClassification.from_pretrained(str(cross), local_files_only=True,
                                                                   attn_implementation="eager").eval()
        tokenizer = AutoTokenizer.from_pretrained(str(cross), local_files_only=True)
        probe = tokenizer(["a query", "a query"], ["a passage", "a longer passage than the first"],
                          padding=True, return_tensors="pt")
        with warnings.catch_warnings(), torch.inference_mode():
            warnings.simplefilter("ignore")
            torch.onnx.export(Logits(model).eval(), tuple(probe[n] for n in _NAMES), str(path), dynamo=False,
                              opset_version=17, input_names=list(_NAMES), output_names=["logits"],
                              dynamic_axes={**{n: {0: "batch", 1: "sequence"} for n in _NAMES}, "logits": {0: "batch"}})

    def quantise(path: Path) -> None:
        quantize_dynamic(str(fp32), str(path), weight_type=QuantType.QInt8, per_channel=True)

    fp32 = _atomic(folder / "model.onnx", export)
    return _atomic(folder / "model-int8.onnx", quantise)


def ort_int8_scorer(settings: Any, cache_dir: Path, threads_per_lane: int) -> Any:
    """A steadyrank ``PairScorer`` of ``settings`` (an FP32 cross-encoder) whose forward is the int8
    ONNX Runtime session (:func:`export_int8`); logits come back FP32 as ``torch`` tensors."""
    import onnxruntime as ort

    from steadyrank.serve.runtime import load_scorer

    scorer = load_scorer(settings.model_copy(update={"precision": "fp32"}))
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads_per_lane
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(export_int8(Path(settings.path), cache_dir)), options,
                                   providers=["CPUExecutionProvider"])

    def forward(inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        feed = {n: inputs[n].numpy().astype(np.int64, copy=False) for n in _NAMES}
        return torch.from_numpy(session.run(["logits"], feed)[0])

    scorer.backend._field_forward = forward
    scorer.backend.traced = False
    return scorer

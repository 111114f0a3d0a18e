"""A bi-encoder's head after the transformer: pooling over the tokens, then the sentence-transformers
``Dense`` layers (:mod:`serve.runtime.st_folder`), in the model dtype, as sentence-transformers
computes them. ``mask`` is the pooling mask: the attention mask, with a prompt's tokens zeroed when
the pooling config says ``include_prompt: false``. Rows are padded on the right.

- ``mean = Σ_t m_t·h_t / max(Σ_t m_t, 1)``, summed in the model dtype;
- ``mean_sqrt_len_tokens = Σ_t m_t·h_t / √max(Σ_t m_t, 1e-9)``, ``weightedmean = Σ_t t·m_t·h_t / Σ_t t·m_t``
  (t = 1-based position), both accumulated in FP32 for BF16/FP16 models and cast back, as
  sentence-transformers does;
- ``cls`` = h at the first position the mask keeps; ``max = max_t h_t`` over kept tokens;
- ``lasttoken`` = h at the last position the mask keeps (0 when it keeps none).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from steadyrank.serve.errors import ModelLoadError
from steadyrank.serve.runtime.st_folder import DenseLayer, Pooling


def _accumulation(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def pool(hidden: torch.Tensor, mask: torch.Tensor, mode: Pooling) -> torch.Tensor:
    """(b, L, dim) hidden states and a (b, L) 0/1 mask → (b, dim) pooled, in the hidden dtype."""
    rows = torch.arange(hidden.shape[0], device=hidden.device)
    if mode == "cls":
        return hidden[rows, mask.to(torch.int).argmax(dim=1)]
    if mode == "lasttoken":
        kept, from_end = mask.flip(1).max(dim=1)
        last = hidden.shape[1] - 1 - from_end
        return hidden[rows, last] * (kept > 0).unsqueeze(-1).to(hidden.dtype)
    m = mask.unsqueeze(-1).to(hidden.dtype)
    if mode == "mean":
        return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)
    if mode == "max":
        return hidden.masked_fill(m == 0, torch.finfo(hidden.dtype).min).max(dim=1).values
    acc = _accumulation(hidden.dtype)
    if mode == "mean_sqrt_len_tokens":
        total = (hidden * m).sum(dim=1, dtype=acc)
        return (total / torch.sqrt(m.sum(dim=1, dtype=acc).clamp(min=1e-9))).to(hidden.dtype)
    weights = m.to(acc) * torch.arange(1, hidden.shape[1] + 1, device=hidden.device, dtype=acc).view(1, -1, 1)
    return ((hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)).to(hidden.dtype)


def _dense_weights(folder: Path) -> dict[str, torch.Tensor]:
    safe, pickled = folder / "model.safetensors", folder / "pytorch_model.bin"
    try:
        if safe.is_file():
            from safetensors.torch import load_file

            return load_file(str(safe))
        return torch.load(pickled, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, ValueError) as exc:
        raise ModelLoadError(f"{folder}: cannot read the Dense weights: {exc}") from exc


class Dense(torch.nn.Module):
    """sentence-transformers' ``Dense``: ``activation(linear(x))``, ``+ x`` (or ``+ residual(x)``) with
    ``use_residual``; its state dict keys are sentence-transformers' own (``linear.*``, ``residual.*``)."""

    def __init__(self, layer: DenseLayer) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(layer.in_features, layer.out_features, bias=layer.bias)
        self.activation = getattr(torch.nn, layer.activation)()
        self.use_residual = layer.residual
        projected = layer.residual and layer.in_features != layer.out_features
        self.residual = torch.nn.Linear(layer.in_features, layer.out_features, bias=False) if projected else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.activation(self.linear(x))
        if self.use_residual:
            out = out + (x if self.residual is None else self.residual(x))
        return out


def load_dense(layers: Sequence[DenseLayer], width: int, dtype: torch.dtype, device: torch.device) -> torch.nn.Module | None:
    """The Dense layers as one module with weights in ``dtype`` on ``device``, or None without any;
    ``width`` is the pooled embedding's (the first layer's input)."""
    if not layers:
        return None
    modules: list[torch.nn.Module] = []
    for layer in layers:
        if layer.in_features != width:
            raise ModelLoadError(f"{layer.folder}: Dense in_features {layer.in_features} != the {width} values it gets")
        dense = Dense(layer)
        try:
            dense.load_state_dict(_dense_weights(layer.folder))
        except RuntimeError as exc:
            raise ModelLoadError(f"{layer.folder}: Dense weights do not fit its config: {exc}") from exc
        modules.append(dense)
        width = layer.out_features
    return torch.nn.Sequential(*modules).to(device=device, dtype=dtype).eval()

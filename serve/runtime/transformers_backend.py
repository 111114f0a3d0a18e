"""Forward passes with Hugging Face transformers (CPU or CUDA): pooled embeddings and pair logits.

Outputs stay in the model dtype; φ is applied by :mod:`serve.runtime.hps`. A bi-encoder's pooling
and Dense layers (:mod:`serve.runtime.pooling`) run in the model dtype, as sentence-transformers
does. Encoders are padded on the right; causal-LM prompts on the left with
``position_ids = cumsum(mask) − 1``, so the last position is every row's last real token.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch

from steadyrank.serve.errors import ModelLoadError
from steadyrank.serve.runtime.batching import Batch, make_batch, run_batched_many
from steadyrank.serve.runtime.inspection import ModelSpec
from steadyrank.serve.runtime.loading import load_tokenizer, load_torch_model, resolve_device, torch_dtype
from steadyrank.serve.runtime.pooling import load_dense, pool
from steadyrank.serve.runtime.precision import resolved_precision
from steadyrank.serve.runtime.settings import ModelSettings
from steadyrank.serve.runtime.st_folder import head_width
from steadyrank.serve.runtime.tokenization import Encoded, encode_pairs, encode_prompts, encode_texts, prompt_length
from steadyrank.serve.runtime.traced import Inputs, trace_field

if TYPE_CHECKING:
    from transformers import PretrainedConfig

_UNBOUNDED = 1_000_000
# Probe inputs for checking a traced forward: three lengths; rows (0, 1, 2) padded, (1,) unpadded,
# (1, 0) padded to another width.
_PROBE_TEXTS = ("a", "a short probe text", "a longer probe text, with more words than the other two have")
_PROBE_ROWS = ((0, 1, 2), (1,), (1, 0))


_T = TypeVar("_T")
_cudnn_sdpa_lock = threading.Lock()
_cudnn_sdpa_users = 0  # forward calls inside cudnn_attention_off, all threads together
_cudnn_sdpa_saved = True  # torch's setting before the first of them


@contextmanager
def cudnn_attention_off() -> Iterator[None]:
    """Keep cuDNN out of ``scaled_dot_product_attention`` while the block runs.

    Why: torch 2.11 on an H200 sends FP16/BF16 attention with a padding mask to cuDNN, which
    builds an execution plan for every shape it has not seen (bare SDPA, 32 × 12 heads × L × 32:
    about 60 ms the first time per L, 0.4 ms after). Our length-sorted batches are padded to
    their own longest row, so most batches of a call are new shapes (the TREC precision-report
    MiniLM encode: 106 batches, 87 shapes); cuDNN attention's CPU side took 91 % of the CPU time
    in a profile of 300 of its texts, and BF16 took 5.96 s against FP32's 1.23 s for all 3,087.
    FP32 never goes to cuDNN, so only the low precisions were slow. With cuDNN off, SDPA takes
    the memory-efficient kernel (FlashAttention for batches without padding), which needs no
    per-shape plan: BF16 1.71 s, FP16 1.67 s on the same run.

    torch keeps the setting per process, not per thread, so concurrent forward calls (forward
    lanes) share one count: the first in turns cuDNN off, the last out restores what was set
    before. A thread outside these blocks may see cuDNN off meanwhile; that changes its kernel
    choice, never a result beyond the kernels' rounding.
    """
    global _cudnn_sdpa_users, _cudnn_sdpa_saved
    with _cudnn_sdpa_lock:
        if _cudnn_sdpa_users == 0:
            _cudnn_sdpa_saved = torch.backends.cuda.cudnn_sdp_enabled()
            torch.backends.cuda.enable_cudnn_sdp(False)
        _cudnn_sdpa_users += 1
    try:
        yield
    finally:
        with _cudnn_sdpa_lock:
            _cudnn_sdpa_users -= 1
            if _cudnn_sdpa_users == 0:
                torch.backends.cuda.enable_cudnn_sdp(_cudnn_sdpa_saved)


def without_cudnn_attention(forward: Callable[[Batch], _T]) -> Callable[[Batch], _T]:
    """``forward`` run inside :func:`cudnn_attention_off`."""

    def run(batch: Batch) -> _T:
        with cudnn_attention_off():
            return forward(batch)

    return run


def _token_id(tokenizer: Any, token: str | int, vocab_size: int, name: str) -> int:
    """The id of a yes/no token given as an id or as text that tokenises to exactly one token."""
    if isinstance(token, int):
        if not 0 <= token < vocab_size:
            raise ModelLoadError(f"{name}={token} is outside the vocabulary (size {vocab_size})")
        return token
    ids = tokenizer(token, add_special_tokens=False)["input_ids"]
    if len(ids) != 1 or ids[0] == tokenizer.unk_token_id:
        raise ModelLoadError(f"{name}={token!r} is not a single known token (tokenises to {ids})")
    return int(ids[0])


def model_config(model: torch.nn.Module) -> PretrainedConfig:
    """``model.config``, typed: the transformers config of a model :func:`load_torch_model` loaded (torch's
    ``Module.__getattr__`` is typed as giving tensors and modules only)."""
    from transformers import PretrainedConfig

    config = model.config
    assert isinstance(config, PretrainedConfig)
    return config


class TransformersBackend:
    """One loaded model (weights in ``settings.precision``) with batched, budgeted forward passes."""

    def __init__(self, spec: ModelSpec, settings: ModelSettings) -> None:
        self.spec = spec
        self.settings = settings
        self.device = resolve_device(settings.device)
        precision = resolved_precision(settings)  # the scorer and embedder resolve "auto" at load
        self.dtype = torch_dtype(precision)
        self.tokenizer = load_tokenizer(spec.path)
        self.tokenizer.truncation_side = settings.truncation_side
        self.model = load_torch_model(spec, precision, self.device)
        limits = [settings.max_length, spec.max_seq_length or _UNBOUNDED]
        if getattr(self.tokenizer, "model_max_length", _UNBOUNDED) < _UNBOUNDED:
            limits.append(int(self.tokenizer.model_max_length))
        self.max_length = min(limits)
        pad_id = self.tokenizer.pad_token_id
        self.pad_id = int(pad_id if pad_id is not None else self.tokenizer.eos_token_id or 0)
        if spec.kind == "causal-lm":
            vocab = int(model_config(self.model).vocab_size)
            self.no_id = _token_id(self.tokenizer, settings.no_token, vocab, "no_token")
            self.yes_id = _token_id(self.tokenizer, settings.yes_token, vocab, "yes_token")
        hidden = int(model_config(self.model).hidden_size)
        self.head = load_dense(spec.dense, hidden, self.dtype, self.device) if spec.kind == "bi-encoder" else None
        self.dim = head_width(spec.dense, hidden)  # a bi-encoder's embedding dimension
        traced = None
        if settings.torchscript and self.device.type == "cpu" and spec.kind != "causal-lm":
            traced = trace_field(self.model, self._field, self._probes())
        self.traced = traced is not None  # the forward runs as a verified TorchScript trace
        self._field_forward = traced or self._eager_field

    @property
    def _field(self) -> str:
        return "logits" if self.spec.kind == "cross-encoder" else "last_hidden_state"

    def _eager_field(self, inputs: Inputs) -> torch.Tensor:
        return getattr(self.model(**inputs), self._field)

    def _probes(self) -> list[Inputs]:
        if self.spec.kind == "cross-encoder":
            encoded = encode_pairs(self.tokenizer, [("probe query", t) for t in _PROBE_TEXTS], self.max_length, "truncate")
        else:
            encoded = encode_texts(self.tokenizer, _PROBE_TEXTS, self.max_length, "truncate")
        batches = [
            make_batch(np.array(rows), encoded.input_ids, encoded.token_type_ids, self.pad_id, "right", self.device)
            for rows in _PROBE_ROWS
        ]
        return [self._encoder_inputs(b) for b in batches]

    # ---- forward functions, one batch each -------------------------------------------------

    def _encoder_inputs(self, batch: Batch) -> dict[str, torch.Tensor]:
        inputs = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask}
        if batch.token_type_ids is not None:
            inputs["token_type_ids"] = batch.token_type_ids
        return inputs

    def _pool(self, prompt_tokens: Sequence[int], batch: Batch) -> torch.Tensor:
        """Pooled (and Dense) embeddings of a batch; the first ``prompt_tokens[batch.source]`` tokens
        of each row are left out of the pooling (``include_prompt: false``)."""
        hidden = self._field_forward(self._encoder_inputs(batch))  # (b, L, dim), model dtype
        mask, skip = batch.attention_mask, prompt_tokens[batch.source]
        if skip:
            mask = mask.clone()
            mask[:, :skip] = 0
        assert self.spec.pooling is not None  # a bi-encoder's spec has one
        pooled = pool(hidden, mask, self.spec.pooling)
        return pooled if self.head is None else self.head(pooled)

    def _classify(self, batch: Batch) -> torch.Tensor:
        return self._field_forward(self._encoder_inputs(batch))  # (b, 1 | 2)

    def _yes_no(self, batch: Batch) -> torch.Tensor:
        positions = (batch.attention_mask.cumsum(dim=1) - 1).clamp(min=0)
        logits = self.model(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            position_ids=positions,
            logits_to_keep=1,
            use_cache=False,
        ).logits[:, -1]
        return torch.stack([logits[:, self.no_id], logits[:, self.yes_id]], dim=-1)  # (b, 2): [no, yes]

    # ---- public entry points -------------------------------------------------------------

    def _run(self, encoded: Sequence[Encoded], forward: Any, left: bool, show_progress: bool,
             desc: str) -> list[torch.Tensor]:
        if self.device.type == "cuda":  # no cuDNN attention plan per batch shape (cudnn_attention_off)
            forward = without_cudnn_attention(forward)
        return run_batched_many(
            [(e.input_ids, e.token_type_ids) for e in encoded],
            forward=forward,
            batch_tokens=self.settings.batch_tokens,
            batch_size=self.settings.batch_size,
            max_padding=self.settings.padding_bound(self.device.type),
            parts=self.settings.parts_bound(self.device.type),
            pad_id=self.pad_id,
            padding_side="left" if left else "right",
            device=self.device,
            show_progress=show_progress,
            desc=desc,
        )

    def pooled_many(
        self, text_lists: Sequence[Sequence[str]], prompts: Sequence[str] | None = None, show_progress: bool = False
    ) -> list[tuple[torch.Tensor, np.ndarray]]:
        """Per list: pooled (un-normalised) embeddings in the model dtype, (n, dim) on CPU, and
        truncation flags, each text after its list's prompt (``prompts[k]``; None: no prompt); the
        lists' forward batches run together (as :meth:`pair_logits_many`)."""
        prompts = list(prompts) if prompts is not None else [""] * len(text_lists)
        encoded = [encode_texts(self.tokenizer, texts, self.max_length, self.settings.overflow, prompt)
                   for texts, prompt in zip(text_lists, prompts, strict=True)]
        skips = [0 if self.spec.include_prompt else prompt_length(self.tokenizer, p) for p in prompts]
        outs = self._run(encoded, partial(self._pool, skips), False, show_progress, f"encode {self.settings.precision}")
        return [(out, e.truncated) for out, e in zip(outs, encoded, strict=True)]

    def pair_logits(
        self, pairs: Sequence[tuple[str, str]], show_progress: bool = False, instruction: str | None = None
    ) -> tuple[torch.Tensor, np.ndarray]:
        """Raw logits in the model dtype, (n, c) on CPU, and truncation flags.

        Cross-encoder: the classification head's 1 or 2 logits. Causal LM: last-position logits of
        ``[no_token, yes_token]``, its prompt with ``instruction`` (None: the settings').
        """
        return self.pair_logits_many([pairs], show_progress, [instruction])[0]

    def pair_logits_many(
        self, pair_lists: Sequence[Sequence[tuple[str, str]]], show_progress: bool = False,
        instructions: Sequence[str | None] | None = None,
    ) -> list[tuple[torch.Tensor, np.ndarray]]:
        """:meth:`pair_logits` of each list (``instructions[k]`` for list k), their forward batches run
        together (:func:`serve.runtime.batching.run_batched_many`: each list's result is what it gets alone)."""
        s = self.settings
        desc = f"score {s.precision}"
        if self.spec.kind == "cross-encoder":
            encoded = [encode_pairs(self.tokenizer, pairs, self.max_length, s.overflow) for pairs in pair_lists]
            forward, left = self._classify, False
        else:
            chosen = list(instructions) if instructions is not None else [None] * len(pair_lists)
            encoded = [
                encode_prompts(self.tokenizer, pairs, s.prompt_template, instruction or s.instruction, self.max_length,
                               s.overflow, s.truncation_side)
                for pairs, instruction in zip(pair_lists, chosen, strict=True)
            ]
            forward, left = self._yes_no, True
        outs = self._run(encoded, forward, left, show_progress, desc)
        return [(out, e.truncated) for out, e in zip(outs, encoded, strict=True)]

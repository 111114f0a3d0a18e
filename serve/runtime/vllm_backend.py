"""Optional vLLM backend (extra ``vllm``; GPU serving) for cross-encoders and causal-LM rerankers.

vLLM is imported only when this backend is chosen. Inputs are tokenised here exactly as on the
transformers backend (same truncation, same ``truncated`` flags) and sent as token prompts to
``LLM.classify`` with the pooler's activation switched off, so vLLM returns raw logits; HPS (or
native φ) is then applied by :mod:`serve.runtime.hps` like on every other backend. A causal-LM
yes/no reranker is loaded the way vLLM serves Qwen3-Reranker: as a sequence classifier whose one
logit is ``z_yes − z_no`` (so ``sigmoid`` of it equals ``softmax([z_no, z_yes])[1]``).

The logits vLLM hands back are cast to the model dtype (exact when its head ran in that dtype) so
that ``native`` still reproduces model-dtype φ. Tests of this module run only where vLLM and a GPU
exist; elsewhere they skip.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from steadyrank.serve.errors import ModelLoadError, UnsupportedModelError
from steadyrank.serve.runtime.inspection import ModelSpec
from steadyrank.serve.runtime.loading import load_tokenizer, torch_dtype
from steadyrank.serve.runtime.precision import resolved_precision
from steadyrank.serve.runtime.settings import ModelSettings
from steadyrank.serve.runtime.tokenization import encode_pairs, encode_prompts

_VLLM_DTYPE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def _import_vllm() -> Any:
    try:  # by name: vLLM is an optional extra (GPU machines), not installed where the code is type-checked
        vllm = importlib.import_module("vllm")
    except ImportError as exc:
        raise ModelLoadError(
            "backend 'vllm' needs vLLM: pip install 'steadyrank[vllm]' (GPU machines only)"
        ) from exc
    return vllm


def _token_text(tokenizer: Any, token: str | int) -> str:
    return tokenizer.convert_ids_to_tokens(token) if isinstance(token, int) else token


class VllmBackend:
    """A vLLM engine scoring (query, document) pairs to raw logits in the model dtype."""

    def __init__(self, spec: ModelSpec, settings: ModelSettings) -> None:
        if spec.kind == "bi-encoder":
            raise UnsupportedModelError("the vllm backend serves cross-encoders and causal-LM rerankers only")
        vllm = _import_vllm()
        self.tokenizer = load_tokenizer(spec.path)
        if spec.kind == "cross-encoder" and "token_type_ids" in self.tokenizer.model_input_names:
            raise UnsupportedModelError(
                f"{spec.path}: this cross-encoder uses token type ids, which token prompts cannot carry; "
                "serve it with backend='transformers'"
            )
        self.spec = spec
        self.settings = settings
        self.dtype = torch_dtype(resolved_precision(settings))  # the scorer resolves "auto" at load
        self.tokenizer.truncation_side = settings.truncation_side
        overrides: dict[str, Any] = {}
        if spec.kind == "causal-lm":
            overrides = {
                "architectures": [spec.architecture.replace("ForCausalLM", "ForSequenceClassification")],
                "classifier_from_token": [
                    _token_text(self.tokenizer, settings.no_token),
                    _token_text(self.tokenizer, settings.yes_token),
                ],
                "is_original_qwen3_reranker": True,
            }
        self.llm = vllm.LLM(
            model=str(spec.path),
            runner="pooling",
            dtype=_VLLM_DTYPE[settings.precision],
            max_model_len=settings.max_length,
            hf_overrides=overrides,
        )
        self._pooling = vllm.PoolingParams(use_activation=False)
        self._prompt = vllm.inputs.TokensPrompt

    def pair_logits(
        self, pairs: Sequence[tuple[str, str]], show_progress: bool = False, instruction: str | None = None
    ) -> tuple[torch.Tensor, np.ndarray]:
        """Raw logits (n, c) in the model dtype and truncation flags, in input order; a causal LM's
        prompt with ``instruction`` (None: the settings')."""
        s = self.settings
        if self.spec.kind == "cross-encoder":
            encoded = encode_pairs(self.tokenizer, pairs, s.max_length, s.overflow)
        else:
            encoded = encode_prompts(
                self.tokenizer, pairs, s.prompt_template, instruction or s.instruction, s.max_length, s.overflow,
                s.truncation_side,
            )
        prompts = [self._prompt(prompt_token_ids=ids) for ids in encoded.input_ids]
        outputs = self.llm.classify(prompts, pooling_params=self._pooling, use_tqdm=show_progress)
        logits = torch.tensor([list(o.outputs.probs) for o in outputs], dtype=torch.float32)
        return logits.to(self.dtype), encoded.truncated

    def pair_logits_many(
        self, pair_lists: Sequence[Sequence[tuple[str, str]]], show_progress: bool = False,
        instructions: Sequence[str | None] | None = None,
    ) -> list[tuple[torch.Tensor, np.ndarray]]:
        """:meth:`pair_logits` of each list in turn (vLLM schedules the batches of each call itself)."""
        chosen = list(instructions) if instructions is not None else [None] * len(pair_lists)
        return [self.pair_logits(pairs, show_progress, instruction)
                for pairs, instruction in zip(pair_lists, chosen, strict=True)]

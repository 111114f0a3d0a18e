"""vLLM backend. The real test runs only where vLLM and a CUDA GPU exist (skipped elsewhere). The
glue test replaces the ``vllm`` module with a stub engine (no GPU here) that returns known logits,
to check that HPS is applied to what vLLM returns and that inputs arrive as our token prompts."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from steadyrank.serve.runtime import ModelLoadError, ModelSettings, UnsupportedModelError, load_scorer

HAS_VLLM_GPU = importlib.util.find_spec("vllm") is not None and torch.cuda.is_available()


class _StubLLM:
    """Stands in for ``vllm.LLM``: one fixed logit per prompt, ``z_i = 4 + i/1000``."""

    created: list[dict] = []

    def __init__(self, **kwargs) -> None:
        _StubLLM.created.append(kwargs)

    def classify(self, prompts, pooling_params, use_tqdm):
        assert pooling_params.use_activation is False
        return [
            types.SimpleNamespace(prompt=p, outputs=types.SimpleNamespace(probs=[4.0 + i / 1000]))
            for i, p in enumerate(prompts)
        ]


@pytest.fixture
def stub_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM = _StubLLM
    module.PoolingParams = lambda use_activation: types.SimpleNamespace(use_activation=use_activation)
    module.inputs = types.SimpleNamespace(TokensPrompt=lambda prompt_token_ids: {"prompt_token_ids": prompt_token_ids})
    monkeypatch.setitem(sys.modules, "vllm", module)
    _StubLLM.created.clear()
    return module


def test_hps_is_applied_to_vllm_logits(stub_vllm, causal_lm: Path) -> None:
    scorer = load_scorer(ModelSettings(path=str(causal_lm), backend="vllm", precision="bf16"))
    out = scorer.rerank("q", ["a", "b", "c"])
    z = torch.tensor([[4.0], [4.001], [4.002]]).bfloat16()  # what a BF16 head would have produced
    assert np.array_equal(out.scores, torch.sigmoid(z.float())[:, 0].numpy())
    assert out.tie_groups == [[0, 1, 2]]  # 4.001 and 4.002 are 4.0 in BF16
    config = _StubLLM.created[0]
    assert config["dtype"] == "bfloat16" and config["runner"] == "pooling"
    assert config["hf_overrides"]["classifier_from_token"] == ["no", "yes"]
    assert config["hf_overrides"]["architectures"] == ["LlamaForSequenceClassification"]


def test_vllm_refuses_token_type_cross_encoders_and_bi_encoders(stub_vllm, cross_encoder_1: Path) -> None:
    with pytest.raises(UnsupportedModelError, match="token type ids"):
        load_scorer(ModelSettings(path=str(cross_encoder_1), backend="vllm"))
    with pytest.raises(UnsupportedModelError, match="transformers"):
        load_scorer(ModelSettings(backend="vllm"))


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed")
def test_missing_vllm_is_a_clear_error(causal_lm: Path) -> None:
    with pytest.raises(ModelLoadError, match=r"steadyrank\[vllm\]"):
        load_scorer(ModelSettings(path=str(causal_lm), backend="vllm"))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_VLLM_GPU, reason="needs vLLM and a CUDA GPU")
def test_vllm_matches_transformers_on_gpu(causal_lm: Path) -> None:
    docs = ["the fahrenheit scale", "cats", "mercury thermometer"]
    ours = load_scorer(ModelSettings(path=str(causal_lm), device="cuda")).rerank("what is fahrenheit", docs)
    theirs = load_scorer(ModelSettings(path=str(causal_lm), backend="vllm")).rerank("what is fahrenheit", docs)
    np.testing.assert_allclose(theirs.scores, ours.scores, atol=1e-4)

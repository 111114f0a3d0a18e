"""HPS is φ applied in FP32 to the upcast low-precision output, bit for bit; native keeps the ties."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from steadyrank.serve.runtime import hps

LOW = [torch.bfloat16, torch.float16]


def _logits(n: int, cols: int, dtype: torch.dtype, seed: int = 0, scale: float = 4.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, cols, generator=g) * scale).to(dtype)


@pytest.mark.parametrize("dtype", LOW)
def test_sigmoid_hps_is_fp32_sigmoid_of_upcast_logits(dtype: torch.dtype) -> None:
    z = _logits(4096, 1, dtype)
    expected = torch.sigmoid(z.float())[:, 0].numpy()
    got = hps.logit_scores(z, "hps")
    assert got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("dtype", LOW)
def test_softmax_hps_is_fp32_softmax_of_upcast_logits(dtype: torch.dtype) -> None:
    z = _logits(4096, 2, dtype)
    expected = torch.softmax(z.float(), dim=-1)[:, 1].numpy()
    assert np.array_equal(hps.logit_scores(z, "hps").view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("dtype", LOW)
def test_native_scores_are_model_dtype_values_with_ties(dtype: torch.dtype) -> None:
    z = _logits(4096, 1, dtype, scale=2.0)
    native = hps.logit_scores(z, "native")
    assert np.array_equal(native, torch.from_numpy(native).to(dtype).float().numpy())  # representable
    assert np.array_equal(native, torch.sigmoid(z)[:, 0].float().numpy())
    assert np.unique(native).size < np.unique(hps.logit_scores(z, "hps")).size


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(-30, 30, allow_nan=False, width=32), min_size=1, max_size=200),
    cols=st.sampled_from([1, 2]),
    dtype=st.sampled_from(LOW),
)
def test_hps_never_has_fewer_unique_scores_than_native(values: list[float], cols: int, dtype: torch.dtype) -> None:
    z = torch.tensor(values + values[: (cols - len(values) % cols) % cols]).reshape(-1, cols).to(dtype)
    assert np.unique(hps.logit_scores(z, "hps")).size >= np.unique(hps.logit_scores(z, "native")).size
    assert np.unique(hps.rank_keys(z, "hps")).size >= np.unique(hps.rank_keys(z, "native")).size


def test_rank_keys_separate_saturated_probabilities() -> None:
    z = torch.tensor([[20.0], [25.0], [18.0]], dtype=torch.bfloat16)
    assert np.all(hps.logit_scores(z, "hps") == 1.0)  # FP32 sigmoid saturates beyond z ≈ 17
    keys = hps.rank_keys(z, "hps")
    assert list(np.argsort(-keys)) == [1, 0, 2]
    two = torch.tensor([[0.5, 2.0], [-1.0, 3.0]], dtype=torch.bfloat16)
    assert np.array_equal(hps.rank_keys(two, "hps"), np.array([1.5, 4.0], dtype=np.float32))


@pytest.mark.parametrize("dtype", LOW)
def test_dot_scores_hps_normalise_and_dot_in_fp32(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(1)
    q = torch.randn(64, 384, generator=g).to(dtype)
    d = torch.randn(64, 384, generator=g).to(dtype)
    qf = q.float() / q.float().norm(dim=-1, keepdim=True)
    df = d.float() / d.float().norm(dim=-1, keepdim=True)
    np.testing.assert_allclose(hps.dot_scores(q, d, "hps"), (qf * df).sum(-1).numpy(), rtol=0, atol=2e-7)
    native = hps.dot_scores(q, d, "native")
    assert np.array_equal(native, torch.from_numpy(native).to(dtype).float().numpy())


def test_embeddings_hps_unit_norm_native_is_upcast() -> None:
    pooled = torch.randn(16, 384).to(torch.bfloat16)
    assert np.allclose(np.linalg.norm(hps.embeddings(pooled, "hps"), axis=1), 1.0, atol=1e-6)
    native = hps.embeddings(pooled, "native")
    assert np.array_equal(native, torch.from_numpy(native).to(torch.bfloat16).float().numpy())


def test_logit_scores_refuse_bad_shape() -> None:
    with pytest.raises(ValueError, match="shape"):
        hps.logit_scores(torch.zeros(3, 3), "hps")

"""CUDA forwards run with cuDNN attention off (no cuDNN plan per batch shape); torch's setting comes back after."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from steadyrank.serve.runtime import transformers_backend as tb
from steadyrank.serve.runtime.transformers_backend import TransformersBackend, cudnn_attention_off


@pytest.fixture
def cudnn_sdp() -> Iterator[None]:
    """cuDNN attention on before the test, torch's own setting back after it."""
    before = torch.backends.cuda.cudnn_sdp_enabled()
    torch.backends.cuda.enable_cudnn_sdp(True)
    yield
    torch.backends.cuda.enable_cudnn_sdp(before)


@pytest.mark.parametrize("setting", [True, False])
def test_off_inside_and_restored_after(cudnn_sdp: None, setting: bool) -> None:
    torch.backends.cuda.enable_cudnn_sdp(setting)
    with cudnn_attention_off():
        assert not torch.backends.cuda.cudnn_sdp_enabled()
    assert torch.backends.cuda.cudnn_sdp_enabled() is setting


def test_restored_after_an_error(cudnn_sdp: None) -> None:
    with pytest.raises(RuntimeError), cudnn_attention_off():
        raise RuntimeError("forward failed")
    assert torch.backends.cuda.cudnn_sdp_enabled()


def test_overlapping_threads_share_one_count(cudnn_sdp: None) -> None:
    """A leaves while B is inside: still off for B; B leaves last: the setting from before comes back."""
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def a() -> None:
        with cudnn_attention_off():
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def b() -> None:
        a_in.wait(5)
        with cudnn_attention_off():
            b_in.set()
            a_out.wait(5)
            seen["b_after_a_left"] = torch.backends.cuda.cudnn_sdp_enabled()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"b_after_a_left": False}
    assert torch.backends.cuda.cudnn_sdp_enabled()


@pytest.mark.parametrize(("device", "wrapped"), [("cuda", True), ("cpu", False)])
def test_backend_forwards_on_cuda_run_without_cudnn(cudnn_sdp: None, monkeypatch: pytest.MonkeyPatch,
                                                     device: str, wrapped: bool) -> None:
    """The forward that ``_run`` hands to the batcher sees cuDNN attention off on CUDA only."""
    seen: list[bool] = []

    def fake_batched(inputs: Any, *, forward: Any, **_: Any) -> list[torch.Tensor]:
        return [forward(None)]

    def forward(batch: Any) -> torch.Tensor:
        seen.append(torch.backends.cuda.cudnn_sdp_enabled())
        return torch.zeros(1)

    monkeypatch.setattr(tb, "run_batched_many", fake_batched)
    backend = object.__new__(TransformersBackend)  # no model: only _run's wiring is under test
    backend.device = torch.device(device)
    backend.settings = _Settings()  # type: ignore[assignment]
    backend.pad_id = 0
    backend._run([], forward, False, False, "test")
    assert seen == [not wrapped]
    assert torch.backends.cuda.cudnn_sdp_enabled()


class _Settings:
    batch_tokens = 64
    batch_size = 1

    def padding_bound(self, device_type: str) -> float:
        return 1.0

    def parts_bound(self, device_type: str) -> int:
        return 1

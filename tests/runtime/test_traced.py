"""TorchScript-traced forwards: bitwise equal to eager across shapes, and refused when they are not."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from steadyrank.serve.runtime import ModelSettings, load_embedder, load_scorer
from steadyrank.serve.runtime.traced import trace_field

_WORDS = "retrieval evaluation ranking passage model query score river tree sourdough heart metal".split()


def _texts(rng: random.Random, n: int, longest: int) -> list[str]:
    return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, longest))) for _ in range(n)]


@pytest.mark.parametrize("fixture", ["cross_encoder_1", "cross_encoder_2"])
def test_traced_cross_encoder_scores_bitwise_equal_to_eager(fixture: str, request: pytest.FixtureRequest) -> None:
    path = str(request.getfixturevalue(fixture))
    # small batches: one request spans many batch shapes (rows 1..4, widths from 4 to ~130 tokens)
    traced = load_scorer(ModelSettings(path=path, batch_size=4, max_length=128))
    eager = load_scorer(ModelSettings(path=path, batch_size=4, max_length=128, torchscript=False))
    assert traced.backend.traced and not eager.backend.traced
    rng = random.Random(0)
    for n, longest in [(1, 1), (3, 5), (17, 40), (9, 200)]:  # 200 words: truncated rows too
        pairs = [("what does the model score", d) for d in _texts(rng, n, longest)]
        a, b = traced.score(pairs), eager.score(pairs)
        assert np.array_equal(a.logits, b.logits) and np.array_equal(a.truncated, b.truncated)


def test_traced_embedder_vectors_bitwise_equal_to_eager() -> None:
    """The real bundled MiniLM (mean pooling, no token type ids): traced and eager vectors are identical."""
    traced = load_embedder(ModelSettings(batch_size=3))
    eager = load_embedder(ModelSettings(batch_size=3, torchscript=False))
    assert traced.backend.traced and not eager.backend.traced
    texts = _texts(random.Random(1), 11, 60)
    assert np.array_equal(traced.encode(texts), eager.encode(texts))


def test_causal_lm_is_never_traced(causal_lm: Path) -> None:
    assert not load_scorer(ModelSettings(path=str(causal_lm))).backend.traced


class _WidthBranch(torch.nn.Module):
    """Code that branches on the input width: a trace records one branch only."""

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> SimpleNamespace:
        x = (input_ids * attention_mask).float().sum(dim=1, keepdim=True)
        return SimpleNamespace(logits=x * 2 if input_ids.shape[1] > 3 else x)


def _inputs(rows: int, width: int) -> dict[str, torch.Tensor]:
    ids = torch.arange(rows * width).reshape(rows, width)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def test_trace_that_differs_from_eager_on_a_probe_is_refused() -> None:
    model = _WidthBranch()
    forward = trace_field(model, "logits", [_inputs(2, 5), _inputs(3, 6)])  # both take the same branch
    assert forward is not None and torch.equal(forward(_inputs(1, 4)), model(**_inputs(1, 4)).logits)
    assert trace_field(model, "logits", [_inputs(2, 5), _inputs(1, 2)]) is None  # the probe of width 2 differs


def test_untraceable_model_is_refused() -> None:
    class NoTensor(torch.nn.Module):
        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> SimpleNamespace:
            return SimpleNamespace(logits=input_ids.tolist())  # not a tensor: tracing fails

    assert trace_field(NoTensor(), "logits", [_inputs(1, 3)]) is None

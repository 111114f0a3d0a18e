"""``precision: int8`` (dynamic int8 Linear layers on the CPU) and ``auto`` on real loads.

Parity is checked on the real bundled all-MiniLM-L6-v2 (as a bi-encoder scorer): int8 keys must stay
close to FP32 and rank nearly alike; the tiny random cross-encoder checks the int8 path of a pair
model (traced, φ on FP32 logits, tie facts in every ranking)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from steadyrank.serve.errors import UnsupportedModelError
from steadyrank.serve.runtime import ModelSettings, load_embedder, load_scorer
from steadyrank.serve.runtime.precision import choose_for

QUERY = "how does a thermometer measure temperature"
DOCS = [
    "a mercury thermometer measures temperature by the expansion of mercury in a glass tube",
    "the fahrenheit scale was proposed in 1724 by daniel gabriel fahrenheit",
    "cats sleep for most of the day and hunt at night",
    "a thermistor changes its electrical resistance with temperature",
    "the stock market fell sharply on monday",
    "infrared thermometers read the thermal radiation an object emits",
    "bread is baked in an oven at around 200 degrees celsius",
    "the boiling point of water is 100 degrees celsius at sea level",
]


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def test_int8_bi_encoder_keeps_fp32_rank_order() -> None:
    fp32 = load_scorer(ModelSettings(precision="fp32")).rerank(QUERY, DOCS)
    int8 = load_scorer(ModelSettings(precision="int8")).rerank(QUERY, DOCS)
    assert int8.scores.dtype == np.float32
    assert np.max(np.abs(int8.scores - fp32.scores)) < 0.05  # cosine scores, in [-1, 1]
    assert _spearman(int8.scores, fp32.scores) > 0.95
    assert list(int8.order[:3]) == list(fp32.order[:3])


def test_int8_embeddings_are_unit_fp32_rows() -> None:
    engine = torch.backends.quantized.engine
    embedder = load_embedder(ModelSettings(precision="int8"))
    assert torch.backends.quantized.engine == engine  # set only while the weights were packed
    vectors = embedder.encode(DOCS[:3])
    assert embedder.precision == "int8" and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    modules = list(embedder.backend.model.modules())
    assert not any(type(m) is torch.nn.Linear for m in modules)  # every Linear quantised
    assert any(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in modules)


def test_int8_cross_encoder_is_traced_and_reports_ties(cross_encoder_1: Path) -> None:
    scorer = load_scorer(ModelSettings(path=str(cross_encoder_1), precision="int8"))
    assert scorer.precision == "int8" and scorer.backend.traced  # the trace matched eager bitwise
    out = scorer.rerank(QUERY, DOCS + DOCS[:2], top_n=3)  # two duplicated documents: exact ties
    assert out.logits.dtype == np.float32
    np.testing.assert_array_equal(out.scores, torch.sigmoid(torch.from_numpy(out.logits[:, 0])).numpy())
    assert sorted(map(sorted, out.tie_groups)) == [[0, 8], [1, 9]]
    again = scorer.rerank(QUERY, DOCS + DOCS[:2], top_n=3)
    np.testing.assert_array_equal(again.scores, out.scores)  # deterministic per request


def test_int8_is_refused_on_the_vllm_backend(cross_encoder_1: Path) -> None:
    with pytest.raises(UnsupportedModelError, match="int8 needs the transformers backend"):
        load_scorer(ModelSettings(path=str(cross_encoder_1), precision="int8", backend="vllm"))


def test_auto_loads_what_this_machine_resolves(cross_encoder_1: Path) -> None:
    scorer = load_scorer(ModelSettings(path=str(cross_encoder_1), device="cpu"))
    expected = choose_for("auto", "cpu")
    assert scorer.precision == expected.precision == scorer.settings.precision
    assert scorer.precision_choice == expected and scorer.precision_choice.requested == "auto"
    assert scorer.backend.dtype == {"bf16": torch.bfloat16, "fp32": torch.float32}[expected.precision]
    assert scorer.rescores_boundary_ties == (expected.precision != "fp32")

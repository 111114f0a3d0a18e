"""Every current sentence-transformers checkpoint format (issue 37, item 4): folders written by the
installed sentence-transformers' own ``save()`` from tiny random models load and embed as its
``encode`` does — the ≥ 5 pooling config (``{"pooling_mode": "mean", "include_prompt": …}``), every
pooling mode, Dense layers after the pooling (with and without a residual), a ``Normalize`` module
— and the ≤ 4 flag format still reads the same."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from steadyrank.serve.runtime import ModelSettings, UnsupportedModelError, load_embedder
from steadyrank.serve.runtime.inspection import inspect_model
from tests.runtime.st_models import save_st, tiny_transformer

TEXTS = ["a", "the thermometer was invented by fahrenheit", "mercury is a liquid metal at room temperature",
         "how do you bake bread with a sourdough starter and a hot dutch oven", "heart disease"]
TOLERANCE = 2e-6  # FP32: the same arithmetic as sentence-transformers, summed in another order at most


@pytest.fixture(scope="module")
def base(tmp_path_factory, tokenizer) -> Path:
    return tiny_transformer(tokenizer, tmp_path_factory.mktemp("st-base"))


def _reference(folder: Path, prompt: str | None = None) -> np.ndarray:
    model = SentenceTransformer(str(folder), device="cpu")
    return model.encode(TEXTS, prompt=prompt, normalize_embeddings=True, convert_to_numpy=True)


def _ours(folder: Path, prompt: str = "") -> np.ndarray:
    return load_embedder(ModelSettings(path=str(folder), precision="fp32")).encode(TEXTS, prompt=prompt)


def _assert_same(ours: np.ndarray, reference: np.ndarray) -> None:
    assert ours.shape == reference.shape
    assert float(np.abs(ours - reference).max()) <= TOLERANCE
    sims_ours, sims_ref = ours @ ours[0], reference @ reference[0]
    assert np.argsort(-sims_ours, kind="stable").tolist() == np.argsort(-sims_ref, kind="stable").tolist()


@pytest.mark.parametrize("pooling", ["mean", "cls", "max", "lasttoken", "weightedmean", "mean_sqrt_len_tokens"])
def test_every_pooling_mode_saved_by_sentence_transformers(base, tmp_path, pooling) -> None:
    folder = save_st(base, tmp_path / pooling, pooling=pooling)
    config = json.loads((folder / "1_Pooling" / "config.json").read_text())
    assert config["pooling_mode"] == pooling  # the ≥ 5 format, as the installed version writes it
    assert inspect_model(ModelSettings(path=str(folder))).pooling == pooling
    _assert_same(_ours(folder), _reference(folder))


@pytest.mark.parametrize("dense", [[(16, "Tanh")], [(24, "ReLU"), (8, "Identity")]], ids=["tanh", "two-layers"])
def test_dense_after_pooling_and_normalize(base, tmp_path, dense) -> None:
    folder = save_st(base, tmp_path / "dense", dense=dense, normalize=True)
    embedder = load_embedder(ModelSettings(path=str(folder), precision="fp32"))
    assert embedder.dim == dense[-1][0]
    _assert_same(embedder.encode(TEXTS), _reference(folder))


def test_dense_with_a_residual(base, tmp_path) -> None:
    """``use_residual`` (sentence-transformers ≥ 5.7): the input added back, projected where the widths differ."""
    folder = save_st(base, tmp_path / "residual", dense=[(32, "Tanh", True), (16, "GELU", True)])
    assert json.loads((folder / "3_Dense" / "config.json").read_text())["use_residual"] is True
    _assert_same(_ours(folder), _reference(folder))


def test_include_prompt_false_leaves_the_prompt_out_of_the_pooling(base, tmp_path) -> None:
    folder = save_st(base, tmp_path / "instructor", include_prompt=False, prompts={"query": "Represent the question: "})
    prompt = "Represent the question: "
    ours, reference = _ours(folder, prompt), _reference(folder, prompt)
    _assert_same(ours, reference)
    assert float(np.abs(ours - _ours(save_st(base, tmp_path / "with", prompts={"query": prompt}), prompt)).max()) > 1e-3


def test_the_legacy_flag_format_reads_the_same(base, tmp_path) -> None:
    folder = save_st(base, tmp_path / "legacy", pooling="cls")
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 32, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False,
         "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}))
    _assert_same(_ours(folder), _reference(folder))


def test_two_pooling_modes_and_other_modules_are_refused_by_name(base, tmp_path) -> None:
    folder = save_st(base, tmp_path / "two", pooling="mean")
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode": ["mean", "max"]}))
    with pytest.raises(UnsupportedModelError, match="exactly one pooling mode"):
        inspect_model(ModelSettings(path=str(folder)))
    modules = json.loads((folder / "modules.json").read_text())
    modules.insert(1, {"idx": 9, "name": "9", "path": "9_LayerNorm", "type": "sentence_transformers.models.LayerNorm"})
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(UnsupportedModelError, match="LayerNorm"):
        inspect_model(ModelSettings(path=str(folder)))

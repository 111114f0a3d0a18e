"""Fixtures: tiny random models built at test time (tokenizer from the bundled MiniLM), the real
bundled MiniLM as the embedder, and a tiny synthetic BEIR folder. Nothing is downloaded."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification, LlamaConfig, LlamaForCausalLM

from steadyrank.serve.runtime import bundled_embedder_path

TINY_BERT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
                 max_position_embeddings=512)


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    return bundled_embedder_path()


@pytest.fixture(scope="session")
def tokenizer(minilm_path: Path):
    return AutoTokenizer.from_pretrained(str(minilm_path), local_files_only=True)


def _save(model: torch.nn.Module, tokenizer, path: Path) -> Path:
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def make_cross_encoder(tmp_path_factory, tokenizer) -> Callable[..., Path]:
    """Build a tiny random BertForSequenceClassification; ``edit`` may change its weights first."""

    def make(num_labels: int = 1, seed: int = 0, edit: Callable[[torch.nn.Module], None] | None = None) -> Path:
        torch.manual_seed(seed)
        config = BertConfig(vocab_size=tokenizer.vocab_size, num_labels=num_labels, **TINY_BERT)
        model = BertForSequenceClassification(config).eval()
        if edit is not None:
            with torch.no_grad():
                edit(model)
        return _save(model, tokenizer, tmp_path_factory.mktemp(f"cross{num_labels}-{seed}"))

    return make


@pytest.fixture(scope="session")
def cross_encoder_1(make_cross_encoder) -> Path:
    return make_cross_encoder(num_labels=1)


@pytest.fixture(scope="session")
def cross_encoder_2(make_cross_encoder) -> Path:
    return make_cross_encoder(num_labels=2)


@pytest.fixture(scope="session")
def causal_lm(tmp_path_factory, tokenizer) -> Path:
    torch.manual_seed(0)
    # Llama, not Qwen2: transformers maps qwen2 directories to Qwen2Tokenizer whatever they ship.
    config = LlamaConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False)
    return _save(LlamaForCausalLM(config).eval(), tokenizer, tmp_path_factory.mktemp("causal"))


@pytest.fixture(scope="session")
def beir_dir(tmp_path_factory) -> Path:
    """A tiny BEIR folder: 3 queries, 12 passages, graded qrels (one query has no judgments)."""
    root = tmp_path_factory.mktemp("beir")
    topics = {
        "q1": ("thermometer inventor fahrenheit", ["fahrenheit invented the mercury thermometer",
                                                  "the fahrenheit scale measures temperature",
                                                  "celsius proposed a centigrade scale",
                                                  "mercury is a liquid metal"]),
        "q2": ("causes of heart disease", ["high blood pressure causes heart disease",
                                           "smoking damages the heart and arteries",
                                           "exercise keeps the heart healthy",
                                           "the heart pumps blood through the body"]),
        "q3": ("how to bake sourdough bread", ["sourdough bread needs a starter and flour",
                                               "bake the loaf in a hot dutch oven",
                                               "bread is a staple food", "yeast makes dough rise"]),
    }
    corpus, queries, qrels = [], [], ["query-id\tcorpus-id\tscore"]
    for q, (text, docs) in topics.items():
        queries.append({"_id": q, "text": text, "metadata": {}})
        for j, doc in enumerate(docs):
            corpus.append({"_id": f"{q}d{j}", "title": "", "text": doc, "metadata": {}})
            if q != "q3" and j < 3:
                qrels.append(f"{q}\t{q}d{j}\t{3 - j}")
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n")
    return root

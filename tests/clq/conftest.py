"""Tiny random models for the CLQ sweep tests (real transformers code, seconds to run).

Stand-ins: no trained reranker or small embedder exists offline, so quality numbers of these
sweeps mean nothing; the tests check the sweep's mechanics (builds, caching, frontier, resume).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.tiers import integration_fixture

TINY_BERT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
                 max_position_embeddings=512)


@pytest.fixture(scope="session")
@integration_fixture
def tiny_models(tmp_path_factory) -> tuple[Path, Path]:
    """``(bi-encoder dir, cross-encoder dir)``: a sentence-transformers-layout tiny BERT with mean
    pooling (the bundled MiniLM's modules and tokenizer) and a tiny 1-logit cross-encoder."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification, BertModel

    from steadyrank.serve.runtime import bundled_embedder_path

    minilm = bundled_embedder_path()
    tokenizer = AutoTokenizer.from_pretrained(str(minilm), local_files_only=True)
    root = tmp_path_factory.mktemp("clq-models")
    torch.manual_seed(0)
    embedder = root / "tiny-embedder"
    BertModel(BertConfig(vocab_size=tokenizer.vocab_size, **TINY_BERT)).eval().save_pretrained(embedder)
    tokenizer.save_pretrained(embedder)
    for name in ("modules.json", "sentence_bert_config.json"):
        shutil.copy(minilm / name, embedder / name)
    shutil.copytree(minilm / "1_Pooling", embedder / "1_Pooling")
    (embedder / "1_Pooling" / "config.json").write_text(
        (minilm / "1_Pooling" / "config.json").read_text().replace("384", "32"))
    cross = root / "tiny-cross-encoder"
    BertForSequenceClassification(BertConfig(vocab_size=tokenizer.vocab_size, num_labels=1, **TINY_BERT)).eval().save_pretrained(cross)
    tokenizer.save_pretrained(cross)
    return embedder, cross


def write_grid(path: Path, embedder: Path, cross: Path, *, latency_queries: int = 2) -> Path:
    """A 2 dimensions × 3 ANN × 3 K policies × 2 reranker regimes grid (dense), plus bm25."""
    path.write_text(f"""
embedders: [{{name: tiny, path: {embedder}}}]
dimensions: [full, PCA16]
ann:
  - {{name: flat, factory: Flat}}
  - {{name: hnsw, factory: "HNSW8,Flat", ef_search: 8}}
  - {{name: ivf, factory: "IVF4,Flat", nprobe: 1}}
first_stages: [dense, bm25]
k_policies:
  - {{name: k5, k: 5}}
  - {{name: k10, k: 10}}
  - {{name: dyn5-10, routing: {{k_low: 5, k_high: 10, top_n: 3, margin_at: 3, overlap_at: 3, boundary_at: 2}}}}
rerankers:
  - {{name: fp32-hps, path: {cross}, precision: fp32}}
  - {{name: bf16-native, path: {cross}, precision: bf16, scoring: native}}
prices: {{rerank_per_1k_tokens: 0.01, generator_per_1k_tokens: 0.1, index_per_gib_month: 5, queries_per_month: 1000}}
generator_chunks: 3
latency: {{stat: p95_ms, queries: {latency_queries}}}
bounds: {{sla_ms: [1000000], budget: [1000000, 0.0]}}
bootstrap: {{resamples: 200}}
""")
    return path

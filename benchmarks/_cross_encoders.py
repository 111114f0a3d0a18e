"""Cross-encoders built locally for benchmarks (no Hub): a BERT-base-shaped one with random weights.

``build_base_cross_encoder`` gives the compute of bge-reranker-base or gte-reranker-base (12 layers,
768 hidden, 12 heads, 3,072 intermediate, 512 positions; about 110 M parameters) with seeded random
weights and a 1-logit head, and the bundled all-MiniLM-L6-v2 tokenizer (BERT's uncased WordPiece
vocabulary of 30,522 tokens). Its scores mean nothing; its speed is a base-size reranker's.
Imports torch, transformers and ``steadyrank.serve.runtime`` only (no FAISS, Ray or network).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

#: BERT-base's shape (bert-base-uncased's config.json).
BERT_BASE = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
             "max_position_embeddings": 512}


def build_base_cross_encoder(cache_dir: Path, seed: int = 0) -> Path:
    """A BERT-base-shaped ``BertForSequenceClassification`` (1 logit, weights drawn after
    ``torch.manual_seed(seed)``) with the bundled MiniLM tokenizer, saved under ``cache_dir`` once
    (atomically: a temporary folder renamed into place); returns its folder."""
    target = cache_dir / f"bert-base-cross-encoder-seed{seed}"
    if (target / "config.json").is_file():
        return target
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from steadyrank.serve.runtime import bundled_embedder_path

    tokenizer = AutoTokenizer.from_pretrained(str(bundled_embedder_path()), local_files_only=True)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=tokenizer.vocab_size, num_labels=1, **BERT_BASE)
    return save_model_folder(BertForSequenceClassification(config).eval(), tokenizer, target)


def save_model_folder(model: Any, tokenizer: Any, target: Path) -> Path:
    """Save ``model`` and ``tokenizer`` (``save_pretrained``) as the folder ``target``, atomically: into
    a temporary folder beside it, renamed into place, so a reader never sees half a model."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    model.save_pretrained(temporary)
    tokenizer.save_pretrained(temporary)
    temporary.rename(target)
    return target

"""Tiny random sentence-transformers folders written by the installed sentence-transformers itself
(``SentenceTransformer(modules=[...]).save()``), for the checkpoint-format and prompt tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from sentence_transformers import SentenceTransformer
from transformers import BertConfig, BertModel

from tests.runtime.conftest import TINY_BERT

# the folders these tests write are sentence-transformers >= 5's (its module layout): older versions
# (the lowest-versions job installs 3.0) cannot write them, so the tests that need them are skipped there
st_models = pytest.importorskip("sentence_transformers.sentence_transformer.modules",
                                reason="writing sentence-transformers >= 5 folders needs sentence-transformers >= 5")


def tiny_transformer(tokenizer, folder: Path, seed: int = 0) -> Path:
    """A random 2-layer BERT (hidden size 32) with the bundled MiniLM's tokenizer, saved to ``folder``."""
    torch.manual_seed(seed)
    BertModel(BertConfig(vocab_size=tokenizer.vocab_size, **TINY_BERT)).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def save_st(base: Path, target: Path, *, pooling: str = "mean", include_prompt: bool = True,
            dense: Sequence[tuple[int, str] | tuple[int, str, bool]] = (), normalize: bool = False,
            prompts: dict[str, str] | None = None,
            default_prompt_name: str | None = None, seed: int = 0) -> Path:
    """A SentenceTransformer over ``base`` (Transformer → Pooling → Dense… → Normalize?) saved to
    ``target`` by sentence-transformers' own ``save``; ``dense``: (out_features, activation class name[,
    use_residual])."""
    torch.manual_seed(seed)
    transformer = st_models.Transformer(str(base), max_seq_length=128)
    width = transformer.get_embedding_dimension()
    modules: list[torch.nn.Module] = [transformer, st_models.Pooling(width, pooling_mode=pooling,
                                                                    include_prompt=include_prompt)]
    for out, activation, *residual in dense:
        modules.append(st_models.Dense(width, out, activation_function=getattr(torch.nn, activation)(),
                                       use_residual=bool(residual and residual[0])))
        width = out
    if normalize:
        modules.append(st_models.Normalize())
    model = SentenceTransformer(modules=modules, prompts=prompts, default_prompt_name=default_prompt_name, device="cpu")
    model.save(str(target))
    return target

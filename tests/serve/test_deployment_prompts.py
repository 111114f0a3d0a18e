"""The Embedder and Reranker deployments (their classes in process, no Ray) with real tiny weights
(issue 37, items 2 and 3). The Embedder puts the prompt a request asks for before each text, on a
tiny random bi-encoder saved by sentence-transformers with e5's prompts: ``role`` ``query`` (what
the Searcher sends for searches and shadow queries) and ``document``, a prompt by name, the default
(none) — each equal to sentence-transformers' own ``encode`` with that prompt — and an unknown
prompt name or an instruction the model cannot take is refused before any work. The Reranker
scores each request of a batch with its own instruction."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer
from transformers import AutoTokenizer

from steadyrank.serve.runtime import InvalidInputError, bundled_embedder_path
from steadyrank.serve.server.components.embedder import Embedder
from steadyrank.serve.server.components.metrics_hub import MetricsHub
from steadyrank.serve.settings import load_settings
from tests.runtime.st_models import save_st, tiny_transformer

TEXTS = ["which metal is liquid at room temperature", "mercury is a liquid metal"]


def test_the_embedder_deployment_applies_the_prompt_asked_for(tmp_path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(str(bundled_embedder_path()))
    folder = save_st(tiny_transformer(tokenizer, tmp_path / "base", seed=3), tmp_path / "e5",
                     prompts={"query": "query: ", "passage": "passage: ", "classification": "classify: "})
    settings = load_settings({"embedder": {"path": str(folder), "precision": "fp32"}})
    deployment = Embedder(settings, MetricsHub().store)
    reference = SentenceTransformer(str(folder), device="cpu")

    async def asks() -> None:  # one event loop, as in a replica
        async def served(**prompt) -> np.ndarray:
            return (await deployment.embed(TEXTS, count_tokens=True, **prompt)).vectors

        for asked, prompt in (({"role": "query"}, "query: "), ({"role": "document"}, "passage: "),
                              ({"prompt_name": "classification"}, "classify: "), ({}, "")):
            expected = reference.encode(TEXTS, prompt=prompt, normalize_embeddings=True)
            assert float(np.abs(await served(**asked) - expected).max()) <= 2e-6, asked
        assert not np.allclose(await served(role="query"), await served())
        with pytest.raises(InvalidInputError, match="not one of this model's prompts"):
            await served(prompt_name="retrieval")
        with pytest.raises(InvalidInputError, match="takes no instruction"):
            await served(role="query", instruction="find metals")

    asyncio.run(asks())
    assert asyncio.run(deployment.info())["prompts"] == {"query": "query: ", "document": "passage: "}


def test_the_reranker_deployment_scores_with_the_request_instruction(tmp_path) -> None:
    """A tiny random Llama yes/no reranker behind the Reranker deployment's batches: a request's
    instruction gives the runtime's scores with that instruction, None the model's own; a request
    mixing both in one batch keeps each its own."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from steadyrank.serve.runtime import ModelSettings, load_scorer
    from steadyrank.serve.server.components.reranker import Reranker

    tokenizer = AutoTokenizer.from_pretrained(str(bundled_embedder_path()))
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, intermediate_size=64,
                                 num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                 pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False)).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    model = ModelSettings(path=str(tmp_path), precision="fp32")
    deployment = Reranker(load_settings({}), model.model_dump(), "primary",
                                        MetricsHub().store)
    scorer = load_scorer(model)
    docs = ["fahrenheit invented the mercury thermometer", "bread rises with yeast"]
    task = "Given a code search query, retrieve code snippets that implement it"

    async def asks() -> tuple:
        return await asyncio.gather(deployment.rerank("who invented it", docs),
                                    deployment.rerank("who invented it", docs, instruction=task))

    own, asked = asyncio.run(asks())
    np.testing.assert_array_equal(own.scores, scorer.rerank("who invented it", docs).scores)
    np.testing.assert_array_equal(asked.scores, scorer.rerank("who invented it", docs, instruction=task).scores)
    assert not np.array_equal(own.scores, asked.scores)

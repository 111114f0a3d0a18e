"""Embedder prompts (issue 37, item 3): a sentence-transformers folder's ``prompts`` are applied —
the query prompt to queries, the document prompt to indexed documents — as sentence-transformers
applies them, and an index records them and refuses an embedder whose prompts differ. The model is
a tiny random bi-encoder saved by sentence-transformers itself, whose ranking changes with the prompt."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.store import EmbedderMismatchError, IndexStore, build_index
from steadyrank.serve.runtime import InvalidInputError, ModelSettings, load_embedder, load_scorer
from steadyrank.serve.runtime.prompts import EmbedPrompts, fill
from tests.runtime.st_models import save_st, tiny_transformer

E5 = {"query": "query: ", "passage": "passage: "}
QUERY = "which metal is liquid at room temperature"
DOCS = ["mercury is a liquid metal", "the thermometer was invented by fahrenheit", "bread rises with yeast",
        "a hot dutch oven bakes the loaf", "high blood pressure causes heart disease", "celsius proposed a scale",
        "gallium melts in your hand", "iron rusts in water", "the heart pumps blood", "smoking damages arteries"]


@pytest.fixture(scope="module")
def e5_folder(tmp_path_factory, tokenizer) -> Path:
    root = tmp_path_factory.mktemp("e5")
    return save_st(tiny_transformer(tokenizer, root / "base", seed=3), root / "st", prompts=E5)


def _order(query_vector: np.ndarray, doc_vectors: np.ndarray) -> list[int]:
    return np.argsort(-(doc_vectors @ query_vector), kind="stable").tolist()


def test_prompts_are_read_as_sentence_transformers_documents_them(e5_folder) -> None:
    embedder = load_embedder(ModelSettings(path=str(e5_folder), precision="fp32"))
    assert (embedder.query_prompt, embedder.document_prompt) == ("query: ", "passage: ")
    reference = SentenceTransformer(str(e5_folder), device="cpu")
    expected = reference.encode_query([QUERY], normalize_embeddings=True)
    assert float(np.abs(embedder.encode([QUERY], prompt=embedder.query_prompt) - expected).max()) <= 2e-6
    # e5 names its document prompt "passage"; sentence-transformers 6.2's encode_document looks only at
    # "document" (always present, "" by default), so the reference is encode() with the prompt itself
    documents = reference.encode(DOCS, prompt="passage: ", normalize_embeddings=True)
    assert float(np.abs(embedder.encode(DOCS, prompt=embedder.document_prompt) - documents).max()) <= 2e-6


def test_an_index_ranks_as_the_prompted_model_and_not_as_the_bare_one(e5_folder, tmp_path) -> None:
    """The retrieval path (build: documents after ``passage: ``; search: the query after ``query: ``)
    gives sentence-transformers' prompted ranking, which differs from the unprompted one."""
    reference = SentenceTransformer(str(e5_folder), device="cpu")
    prompted = _order(reference.encode(QUERY, prompt="query: ", normalize_embeddings=True),
                      reference.encode(DOCS, prompt="passage: ", normalize_embeddings=True))
    bare = _order(reference.encode(QUERY, prompt="", normalize_embeddings=True),
                  reference.encode(DOCS, prompt="", normalize_embeddings=True))
    assert prompted != bare  # the prompt changes this model's ranking
    embedder = load_embedder(ModelSettings(path=str(e5_folder), precision="fp32"))
    documents = [Document(id=f"d{i}", text=t, title="") for i, t in enumerate(DOCS)]
    manifest = build_index(tmp_path / "idx", documents, embedder)
    assert manifest["embedder"]["prompts"] == {"query": "query: ", "document": "passage: "}
    with IndexStore.open(tmp_path / "idx", embedder) as store:
        found = store.search(QUERY, mode="dense", depth=len(DOCS))
    assert [int(i[1:]) for i in found.doc_ids] == prompted


def test_an_index_refuses_an_embedder_with_other_prompts(e5_folder, tmp_path) -> None:
    prompted = load_embedder(ModelSettings(path=str(e5_folder), precision="fp32"))
    bare = load_embedder(ModelSettings(path=str(e5_folder), precision="fp32", prompts={}))
    assert (bare.query_prompt, bare.document_prompt) == ("", "")
    documents = [Document(id=f"d{i}", text=t, title="") for i, t in enumerate(DOCS)]
    build_index(tmp_path / "bare", documents, bare)
    with pytest.raises(EmbedderMismatchError, match="prompts"):
        IndexStore.open(tmp_path / "bare", prompted)
    build_index(tmp_path / "prompted", documents, prompted)
    with pytest.raises(EmbedderMismatchError, match="passage: "):
        IndexStore.open(tmp_path / "prompted", bare)


def test_an_index_from_before_prompts_were_recorded_counts_as_unprompted(e5_folder, tmp_path) -> None:
    bare = load_embedder(ModelSettings(path=str(e5_folder), precision="fp32", prompts={}))
    documents = [Document(id=f"d{i}", text=t, title="") for i, t in enumerate(DOCS)]
    build_index(tmp_path / "old", documents, bare)
    current = (tmp_path / "old" / "CURRENT").read_text().split()[0]
    manifest_file = tmp_path / "old" / current / "manifest.json"
    manifest = json.loads(manifest_file.read_text())
    assert manifest["embedder"].pop("prompts") == {"query": "", "document": ""}
    manifest_file.write_text(json.dumps(manifest))
    import hashlib

    (tmp_path / "old" / "CURRENT").write_text(f"{current} {hashlib.sha256(manifest_file.read_bytes()).hexdigest()}\n")
    with IndexStore.open(tmp_path / "old", bare) as store:
        assert store.count == len(DOCS)
    with pytest.raises(EmbedderMismatchError, match="prompts"):
        IndexStore.open(tmp_path / "old", load_embedder(ModelSettings(path=str(e5_folder), precision="fp32")))


def test_default_prompt_name_and_instruction_templates() -> None:
    only_default = EmbedPrompts.resolve({"retrieval": "Represent this for retrieval: "}, "retrieval")
    assert (only_default.query, only_default.document) == ("Represent this for retrieval: ",) * 2
    qwen = EmbedPrompts.resolve({"query": "Instruct: Given a web search query, retrieve relevant passages that "
                                          "answer the query\nQuery:", "document": ""}, None)
    assert qwen.instruction_template == "Instruct: {instruction}\nQuery:"
    assert qwen.default_instruction == "Given a web search query, retrieve relevant passages that answer the query"
    assert qwen.for_instruction("Find code for {query}") == "Instruct: Find code for {query}\nQuery:"
    with pytest.raises(InvalidInputError, match="takes no instruction"):
        EmbedPrompts.resolve(E5, None).for_instruction("anything")
    with pytest.raises(InvalidInputError, match="not one of this model's prompts"):
        EmbedPrompts.resolve(E5, None).by_name("classification")


def test_slots_are_filled_once() -> None:
    """A query or instruction holding a slot is text: ``fill`` never re-scans what it inserted."""
    template = "<i>{instruction}</i><q>{query}</q><d>{document}</d>"
    out = fill(template, {"instruction": "say {document}", "query": "{instruction}?", "document": "doc"})
    assert out == "<i>say {document}</i><q>{instruction}?</q><d>doc</d>"


def test_a_bi_encoder_reranker_prompts_queries_and_documents(e5_folder) -> None:
    scorer = load_scorer(ModelSettings(path=str(e5_folder), precision="fp32"))
    reference = SentenceTransformer(str(e5_folder), device="cpu")
    q = reference.encode(QUERY, prompt="query: ", normalize_embeddings=True)
    d = reference.encode(DOCS, prompt="passage: ", normalize_embeddings=True)
    scores = scorer.score([(QUERY, doc) for doc in DOCS]).scores
    assert float(np.abs(scores - d @ q).max()) <= 2e-6
    with pytest.raises(InvalidInputError, match="takes no instruction"):
        scorer.score([(QUERY, DOCS[0])], instruction="Find metals")


def test_a_request_chooses_its_prompt() -> None:
    """What the embedding routes ask for (``input_type``, ``prompt_name``, ``instruction``) picks the
    prompt; nothing asked is the default prompt, as sentence-transformers' ``encode``."""
    prompts = EmbedPrompts.resolve({**E5, "classification": "classify: ", "retrieval": "r: "}, "retrieval")
    assert prompts.choose() == "r: "
    assert (prompts.choose("query"), prompts.choose("document")) == ("query: ", "passage: ")
    assert prompts.choose(name="classification") == "classify: "
    qwen = EmbedPrompts.resolve({"query": "Instruct: find passages\nQuery:"}, None)
    assert qwen.choose("query", instruction="find code") == qwen.choose(instruction="find code") == \
        "Instruct: find code\nQuery:"
    with pytest.raises(InvalidInputError, match="not for documents"):
        qwen.choose("document", instruction="find code")
    with pytest.raises(InvalidInputError, match="not both"):
        qwen.choose(name="query", instruction="find code")

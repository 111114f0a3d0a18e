"""Bad input gets a clear ValueError: empty query or documents, non-strings, over-long inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from steadyrank.serve.runtime import InvalidInputError, ModelLoadError, ModelSettings, load_embedder, load_scorer
from steadyrank.serve.runtime.tokenization import encode_prompts

LONG_DOC = "thermometers measure temperature in degrees " * 80  # ≈ 400 tokens


@pytest.fixture(scope="module")
def scorer(cross_encoder_1: Path):
    return load_scorer(ModelSettings(path=str(cross_encoder_1), max_length=32))


@pytest.mark.parametrize("query", ["", "   ", None, 3])
def test_empty_or_non_string_query(scorer, query) -> None:
    with pytest.raises(InvalidInputError, match="query must be a non-empty string"):
        scorer.rerank(query, ["doc"])


def test_empty_documents_and_non_strings(scorer) -> None:
    with pytest.raises(InvalidInputError, match="documents must not be empty"):
        scorer.rerank("q", [])
    with pytest.raises(InvalidInputError, match=r"documents\[1\] must be a string"):
        scorer.rerank("q", ["a", {"text": "b"}])
    with pytest.raises(InvalidInputError, match="single string"):
        scorer.rerank("q", "a document")
    with pytest.raises(InvalidInputError, match="top_n"):
        scorer.rerank("q", ["a"], top_n=0)
    with pytest.raises(InvalidInputError, match="no .* pairs"):
        scorer.score_pairs([])


def test_over_long_document_is_truncated_and_flagged(scorer, cross_encoder_1: Path) -> None:
    out = scorer.rerank("what do thermometers measure", ["short doc", LONG_DOC])
    assert out.truncated.tolist() == [False, True]
    left = load_scorer(ModelSettings(path=str(cross_encoder_1), max_length=32, truncation_side="left"))
    cut_left = left.rerank("what do thermometers measure", ["short doc", LONG_DOC + " the end"]).scores[1]
    cut_right = scorer.rerank("what do thermometers measure", ["short doc", LONG_DOC + " the end"]).scores[1]
    assert cut_left != cut_right  # the side that is cut matters
    assert cut_right == out.scores[1]  # right truncation keeps the same first 32 tokens


def test_over_long_document_is_refused_when_configured(cross_encoder_1: Path) -> None:
    strict = load_scorer(ModelSettings(path=str(cross_encoder_1), max_length=32, overflow="error"))
    with pytest.raises(InvalidInputError, match="more than max_length=32"):
        strict.rerank("q", ["short", LONG_DOC])
    embedder = load_embedder(ModelSettings(overflow="error"))
    with pytest.raises(InvalidInputError, match="max_length=256"):
        embedder.encode([LONG_DOC])
    assert load_embedder().pooled([LONG_DOC, "short"])[1].tolist() == [True, False]


def test_query_leaving_no_room_is_refused(scorer, causal_lm: Path) -> None:
    with pytest.raises(InvalidInputError, match="no room for the document"):
        scorer.rerank("a very long query " * 10, ["doc " * 40])
    causal = load_scorer(ModelSettings(path=str(causal_lm), max_length=64))
    with pytest.raises(InvalidInputError, match="no room for the document"):
        causal.rerank("query", [LONG_DOC])  # the Qwen3 template alone exceeds 64 tokens


def test_causal_lm_prompt_keeps_template_and_query_when_cut(causal_lm: Path) -> None:
    settings = ModelSettings(path=str(causal_lm), max_length=200)
    tokenizer = load_scorer(settings).backend.tokenizer
    encoded = encode_prompts(tokenizer, [("q", LONG_DOC), ("q", "short")], settings.prompt_template,
                             settings.instruction, 200, "truncate", "right")
    head, tail = settings.prompt_template.replace("{instruction}", settings.instruction).split("{document}")
    prefix = tokenizer(head.replace("{query}", "q"), add_special_tokens=False)["input_ids"]
    suffix = tokenizer(tail, add_special_tokens=False)["input_ids"]
    cut = encoded.input_ids[0]
    assert len(cut) == 200 and encoded.truncated.tolist() == [True, False]
    assert cut[: len(prefix)] == prefix and cut[-len(suffix) :] == suffix
    doc = tokenizer(LONG_DOC, add_special_tokens=False)["input_ids"]
    assert cut[len(prefix) : -len(suffix)] == doc[: 200 - len(prefix) - len(suffix)]


def test_multi_token_yes_word_is_refused(causal_lm: Path) -> None:
    with pytest.raises(ModelLoadError, match="yes_token='absolutely yes'"):
        load_scorer(ModelSettings(path=str(causal_lm), yes_token="absolutely yes"))

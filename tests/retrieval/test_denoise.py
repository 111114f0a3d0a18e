"""Query denoising: the ``rules`` denoiser and the ``llm`` rewriter against a stand-in chat server.

No LLM runs on the test machines: ``tests/golden/llm_standin.py`` is a real HTTP server speaking the
OpenAI chat-completions protocol (its rewrite is the query's first question), standing in for vLLM or a
hosted endpoint, and it can answer slowly or fail.
"""

from __future__ import annotations

import asyncio

import pytest

from steadyrank.retrieval.denoise import denoise_rules
from steadyrank.retrieval.rewrite import LlmRewriter, LlmSettings, rewrite_query
from tests.golden.llm_standin import MODEL, StandinLLM


@pytest.mark.parametrize(("noisy", "clean"), [
    ('Hi! Sorry to bother you — what did Marie Curie publish in 1903 about "radioactive substances"? Thanks 🙏',
     'what did Marie Curie publish in 1903 about "radioactive substances"?'),
    ("Bonjour, euh, je me demandais : quel livre de Hélène Dupont parle du jazz ? Merci d'avance 🙂",
     "quel livre de Hélène Dupont parle du jazz ?"),
    ("Hey everyone, so basically causes of left ventricular hypertrophy 😅 Cheers! 👍",
     "causes of left ventricular hypertrophy!"),
    ("Hello, « Les Misérables » by Victor Hugo 😀", "« Les Misérables » by Victor Hugo"),
    ("so what is the boiling point of water at 2,000 m, thanks", "what is the boiling point of water at 2,000 m"),
])
def test_rules_remove_greetings_fillers_apologies_signoffs_and_emoji(noisy, clean):
    assert denoise_rules(noisy) == clean


@pytest.mark.parametrize("text", [
    "causes of left ventricular hypertrophy",
    "Well-known works by Will Smith",
    'the song "Hello, Goodbye 🙂 thanks" by the Beatles',
    "Bon Jovi albums released 1986–1992",
    "Grace Hopper COBOL 1959 3.5 v2",
    "quel livre de Hélène Dupont parle du jazz ?",
])
def test_rules_leave_clean_queries_names_numbers_and_quotes_alone(text):
    assert denoise_rules(text) == text


def test_rules_normalise_unicode_and_whitespace_and_never_return_empty():
    assert denoise_rules("  Zoe\u0301   Lefe\u0300vre\n\tbooks ") == "Zoé Lefèvre books"
    assert denoise_rules("Hi!  Thanks 🙂") == "Hi! Thanks 🙂"  # nothing but noise: the normalised text


def test_llm_rewrites_caches_and_off_and_rules_modes():
    query = "Hi all, sorry, what did Marie Curie publish in 1903? my coffee is cold"
    with StandinLLM() as llm:
        rewriter = LlmRewriter(LlmSettings(base_url=llm.base_url, model=MODEL, timeout_s=5))
        first = asyncio.run(rewrite_query(query, "llm", rewriter))
        again = asyncio.run(rewrite_query(query, "llm", rewriter))
        assert llm.requests == 1
    assert (first.rewritten, first.source) == ("Hi all, sorry, what did Marie Curie publish in 1903?", "llm")
    assert (again.rewritten, again.source) == (first.rewritten, "llm-cache")
    assert asyncio.run(rewrite_query(query, "off")).rewritten == query
    assert asyncio.run(rewrite_query(query, "rules")).to_json() == {
        "original": query, "rewritten": denoise_rules(query), "denoise": "rules", "source": "rules"}
    with pytest.raises(ValueError, match="needs an LLM endpoint"):
        asyncio.run(rewrite_query(query, "llm"))


@pytest.mark.parametrize("standin", [dict(delay_s=1.0), dict(fail_first=5), dict(invalid_first=0, fail_first=0)])
def test_llm_falls_back_to_rules_on_timeout_error_or_unreachable(standin):
    query = "Hello! Sorry — Grace Hopper COBOL 1959? Thanks 🙏"
    with StandinLLM(**standin) as llm:
        url = llm.base_url if standin.get("delay_s") or standin.get("fail_first") else "http://127.0.0.1:9/v1"
        rewriter = LlmRewriter(LlmSettings(base_url=url, model=MODEL, timeout_s=0.2))
        out = asyncio.run(rewrite_query(query, "llm", rewriter))
    assert (out.rewritten, out.source) == ("Grace Hopper COBOL 1959?", "rules-fallback")
    assert rewriter.fallbacks == 1 and not rewriter.cache


def test_pipeline_searches_the_rewritten_query_and_times_the_denoise_stage(tmp_path, embedder, documents):
    from steadyrank.retrieval.pipeline import local_models, search
    from steadyrank.retrieval.routing import RoutingSettings
    from steadyrank.retrieval.store import IndexStore, build_index

    build_index(tmp_path / "idx", documents, embedder)
    clean = documents[3].text
    noisy = f"Hi there! Sorry, {clean} 🙏 Thanks!"
    settings = RoutingSettings(k_high=10, k_low=10)
    with IndexStore.open(tmp_path / "idx", embedder) as store:
        models = local_models(store, embedder, None, rrf_k=60, rrf_weights=(1.0, 1.0))
        baseline = asyncio.run(search(clean, "hybrid", models, settings))
        rules = asyncio.run(search(noisy, "hybrid", models, settings, denoise="rules"))
        off = asyncio.run(search(noisy, "hybrid", models, settings))
    assert rules.query.to_json() == {"original": noisy, "rewritten": clean, "denoise": "rules", "source": "rules"}
    assert rules.doc_ids == baseline.doc_ids and "denoise" in rules.timings
    assert off.query.rewritten == noisy and "denoise" not in off.timings

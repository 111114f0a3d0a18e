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


@pytest.mark.parametrize(("noisy", "clean"), [
    # a clause of function and noise words only goes, whatever its wording
    ("hey, sorry if my question is silly, what is a sigmet ;-)", "what is a sigmet"),
    ("oh wow, ok so, does anyone know when was the salvation army founded? haha", "when was the salvation army founded?"),
    # meta-requests, emoticons, interjections
    ("Can you tell me what causes left ventricular hypertrophy? thx :)", "what causes left ventricular hypertrophy?"),
    ("I need to know the side effects of metformin, please", "the side effects of metformin"),
    ("uh, like, quick question: best budget laptop 2024 <3", "best budget laptop 2024"),
    ("Bonjour ! Pourriez-vous m'expliquer comment fonctionne la photosynthèse ? Merci :)",
     "comment fonctionne la photosynthèse ?"),
    # a sign-off after an emoji ends its clause
    ("what is a sigmet 🙏 Cheers", "what is a sigmet"),
])
def test_rules_remove_clauses_without_content_meta_requests_emoticons_and_interjections(noisy, clean):
    assert denoise_rules(noisy) == clean


@pytest.mark.parametrize(("noisy", "clean"), [
    ("what is the boiling point of water at 2,000 m — I left my kettle on the stove lol",
     "what is the boiling point of water at 2,000 m"),
    ("quel livre de Hélène Dupont parle du jazz — mon chien dort sur le canapé", "quel livre de Hélène Dupont parle du jazz"),
    ("Hey Jude lyrics - we went dancing all night", "Hey Jude lyrics"),
])
def test_rules_drop_a_set_off_first_person_aside_off_the_query(noisy, clean):
    assert denoise_rules(noisy) == clean


@pytest.mark.parametrize("text", [
    "how do I fix my printer — it jams when I print duplex",       # shares a word (print/printer)
    "history of Paris — my trip to Paris is next week",             # a name
    "what is the capital of France - my flight leaves at 10:30",    # a number
    "what is the best laptop — what do you think?",                # a question
    "quel livre de Hélène Dupont parle du jazz — j'ai lu Marie Curie hier",
    "what vet is open on sunday, my dog is sick",                   # not set off by a dash
    "temperature -5 degrees celsius",
])
def test_rules_keep_asides_that_share_a_word_hold_a_name_or_number_ask_or_are_not_set_off(text):
    assert denoise_rules(text) == text


@pytest.mark.parametrize("text", [
    "well water contamination", "how to dig a well", "what does a bat look like", "presidential pardon",
    "is it ok to eat raw eggs", "I think so", "genre musical", "la photosynthèse c'est quoi", "three cheers",
])
def test_rules_remove_ambiguous_fillers_only_when_set_off(text):
    assert denoise_rules(text) == text
    assert denoise_rules(f"Well, {text}") == text


@pytest.mark.parametrize(("noisy", "clean"), [
    # what a greeting addresses goes with it
    ("Hello wonderful people! what is a sigmet", "what is a sigmet"),
    ("hey reddit, causes of left ventricular hypertrophy", "causes of left ventricular hypertrophy"),
    # a request about the asking, up to its hinge or to the question it frames
    ("would love some input on rsa key definition", "rsa key definition"),
    ("I have been wondering causes of left ventricular hypertrophy", "causes of left ventricular hypertrophy"),
    ("does anyone happen to know how do I mount a disk at boot?", "how do I mount a disk at boot?"),
    ("what do you all know about who is robert gray", "who is robert gray"),
    # a personal sentence sharing nothing with the need, and a short remark after a question
    ("I'm studying for an exam next week. causes of left ventricular hypertrophy?", "causes of left ventricular hypertrophy?"),
    ("how do I add a swap file on Linux? long story", "how do I add a swap file on Linux?"),
    ("rsa key definition (this is driving me nuts) TIA!", "rsa key definition!"),
    # sign-offs
    ("what is a sigmet? Thank you kindly", "what is a sigmet?"),
    ("define visceral. Much love", "define visceral."),
])
def test_rules_remove_addressed_greetings_asking_frames_and_personal_remarks(noisy, clean):
    assert denoise_rules(noisy) == clean


@pytest.mark.parametrize("text", [
    "how to learn about investing",                       # an interrogative frame without a person: the need
    "what can I do to help my dog",
    "My laptop won't boot. What should I check?",         # a personal sentence is kept when the rest is thin
    "morning sickness causes",
    "world peace quotes",
    "hello kitty plush",
])
def test_rules_keep_needs_that_look_like_frames_or_remarks(text):
    assert denoise_rules(text) == text


def test_rules_leave_every_demo_query_unchanged():
    from pathlib import Path

    from steadyrank.retrieval.corpus import read_queries

    queries = read_queries(Path(__file__).resolve().parents[2] / "serve" / "data" / "demo")
    assert {q: denoise_rules(t) for q, t in queries.items()} == queries


def test_a_phrase_inside_a_word_hides_no_phrase_after_it():
    """A noise phrase starts a word: "Delhi all" holds no "hi all", so the sign-off after it goes."""
    assert denoise_rules("cheap flights Delhi all the best") == "cheap flights Delhi"
    assert denoise_rules("is it also so sorry") == "is it also"


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


def test_pipeline_runs_rules_on_a_worker_thread(tmp_path, embedder, documents, monkeypatch):
    """The denoiser's work grows with the query: the event loop that awaits the search never runs it."""
    import threading

    from steadyrank.retrieval import pipeline, rewrite
    from steadyrank.retrieval.routing import RoutingSettings
    from steadyrank.retrieval.store import IndexStore, build_index

    threads = []

    def recorded(text: str) -> str:
        threads.append(threading.get_ident())
        return denoise_rules(text)

    monkeypatch.setattr(rewrite, "denoise_rules", recorded)
    build_index(tmp_path / "idx", documents, embedder)
    with IndexStore.open(tmp_path / "idx", embedder) as store:
        models = pipeline.local_models(store, embedder, None, rrf_k=60, rrf_weights=(1.0, 1.0))

        async def search() -> tuple[int, pipeline.Ranked]:
            return threading.get_ident(), await pipeline.search("Hi! sorry, " + documents[0].text, "bm25", models,
                                                                RoutingSettings(k_high=5, k_low=5), denoise="rules")

        loop_thread, ranked = asyncio.run(search())
    assert ranked.query.rewritten == documents[0].text
    assert len(threads) == 1 and threads[0] != loop_thread

"""The ``rules`` denoiser's cost grows linearly with the query (issue 36), and its linear
implementation answers exactly like the plain rescanning one (``denoise_reference.py``).

Cost is measured two ways, neither an absolute time: the Python lines the denoiser executes
(counted with ``sys.settrace``: deterministic), and the ratio of CPU times of the same hostile shape
at n and 8n characters (the regular expressions' own work, which no line counter sees; the bound,
24, is three times linear and far below quadratic's 64).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from steadyrank.retrieval import denoise
from steadyrank.retrieval.denoise import denoise_rules
from tests.retrieval import denoise_reference


def _words(n: int, prefix: str) -> str:
    """``n`` distinct content words of letters only, all starting with ``prefix`` and no two sharing
    their first four letters."""
    return " ".join(prefix + chr(97 + i // 26 % 26) + chr(97 + i % 26) + "xy" for i in range(n))


#: Hostile queries of about n characters, one per path that used to rescan (issue 36 item 2).
HOSTILE: dict[str, Callable[[int], str]] = {
    "set-off filler chain": lambda n: "ty " * (n // 3),                            # start phrase after start phrase
    "sign-off chain": lambda n: "what is x" + " lol" * (n // 4),                    # end phrase after end phrase
    "name ahead, long word": lambda n: "Ha" + "ha" * (n // 4) + " Lol" + " lol" * (n // 8),
    "dash segments": lambda n: "apple pie" + " — my cat ran" * (n // 13),           # every segment an aside candidate
    "aside against many words": lambda n: _words(n // 12, "w") + " — i " + _words(n // 12, "z"),
    "laughter run": lambda n: "ha" * (n // 2) + "x",
    "unclosed quotes": lambda n: "“«„" * (n // 3),
    "end marks handed back": lambda n: "- x" + " y, ty!" * (n // 7),
    "emoticons and numbers": lambda n: ":( <3 1,5 " * (n // 10),
}


def _lines(fn: Callable[[str], str], text: str) -> int:
    """Python lines executed in the denoiser's module while ``fn(text)`` runs."""
    count = 0
    files = {denoise.__file__, denoise_reference.__file__}

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame, event, arg):
        return local if frame.f_code.co_filename in files else None

    sys.settrace(calls)
    try:
        fn(text)
    finally:
        sys.settrace(None)
    return count


def _cpu_seconds(text: str, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        denoise_rules(text)
        best = min(best, time.process_time() - started)
    return best


@pytest.mark.parametrize("shape", HOSTILE)
def test_lines_executed_grow_linearly(shape: str) -> None:
    small, large = (_lines(denoise_rules, HOSTILE[shape](n)) for n in (1000, 4000))
    assert large <= 4.5 * small, (small, large)


def test_the_line_count_sees_the_old_rescanning() -> None:
    """The same measure on the reference (the code before the fix) grows quadratically."""
    small, large = (_lines(denoise_reference.denoise_rules, HOSTILE["set-off filler chain"](n)) for n in (300, 1200))
    assert large > 8 * small, (small, large)


@pytest.mark.parametrize("shape", HOSTILE)
def test_cpu_time_grows_linearly(shape: str) -> None:
    small, large = (_cpu_seconds(HOSTILE[shape](n)) for n in (1000, 8000))
    assert large <= 24 * max(small, 1e-4), (small, large)


# --- the linear implementation against the plain one ------------------------------------------------

PHRASES = ["hi", "Hello there", "hey everyone", "good morning", "bonjour à tous", "salut", "um", "uh", "so",
           "basically", "you know", "I mean", "quick question", "euh", "en fait", "du coup", "well", "like",
           "ok", "okay", "ben", "genre", "quoi", "pardon", "cheers", "regards", "ty", "sorry", "so sorry",
           "sorry to bother you", "sorry if this is a dumb question", "désolé", "excusez-moi", "thanks",
           "thank you so much", "thx", "kind regards", "merci d'avance", "cordialement", "oh", "wow", "lol",
           "haha", "hahaha", "oups", "btw", "by the way", "can you tell me", "does anyone know",
           "I need to know", "please", "pls", "pourriez-vous m'expliquer", "je voudrais savoir", "svp"]
WORDS = ["what", "is", "the", "a", "of", "boiling", "point", "water", "printer", "print", "my", "I", "je", "mon",
         "coffee", "cold", "cat", "keyboard", "key", "how", "do", "fix", "jazz", "livre", "quel", "also",
         "city", "book", "unlike", "Delhi", "team", "well", "look", "it", "jams", "budget", "laptop", "wondering",
         "about", "know", "anyone", "this", "here", "you", "love", "input", "on", "hoping", "learn", "was", "(", ")",
         "wonderful people", "long story", "reddit"]
NAMES = ["Marie Curie", "Bon Jovi", "Hey Jude", "Hélène Dupont", "Grace Hopper", "Paris"]
OTHER = ["1903", "2,000", "3.5", "10:30", "-5", '"radioactive substances"', '"Hello, thanks"', "« Les Misérables »",
         "“quoted”", "„zitat“", '"', "“", "«", "„", "🙏", "😅👍", "🙂", ":)", ";-)", ":D", "<3", "^^", "j'ai", "d'avance",
         "-", "--", "—", "–", "…"]
SEPARATORS = [" ", " ", " ", ", ", ". ", "! ", "? ", " — ", " – ", " - ", ": ", "; ", "… ", " 🙂 ", ",", "!", "  "]


@st.composite
def queries(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(st.one_of(st.sampled_from(PHRASES), st.sampled_from(WORDS), st.sampled_from(NAMES),
                                     st.sampled_from(OTHER), st.text("ab -'’,.!?—\"“”«»:;😀I", max_size=6)),
                           max_size=14))
    cases = draw(st.lists(st.sampled_from([str.lower, str.upper, str.capitalize, str]), min_size=len(pieces),
                          max_size=len(pieces)))
    seps = draw(st.lists(st.sampled_from(SEPARATORS), min_size=len(pieces), max_size=len(pieces)))
    return "".join(case(piece) + sep for piece, case, sep in zip(pieces, cases, seps, strict=True))


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(queries())
@example("Hi! Sorry to bother you — what did Marie Curie publish in 1903? Thanks 🙏")
@example("what is the boiling point of water at 2,000 m — I left my kettle on the stove lol")
@example("- x y, ty! z, thanks.")
@example("Hello wonderful people! I was wondering about rsa key? (sorry, long story) Much love 🙏")
def test_linear_denoiser_answers_like_the_plain_one(query: str) -> None:
    assert denoise_rules(query) == denoise_reference.denoise_rules(query)


@given(st.text(max_size=40))
@settings(max_examples=800, deadline=None)
def test_linear_denoiser_answers_like_the_plain_one_on_any_text(query: str) -> None:
    query = query.replace("\x00", "").replace("\x01", "")  # the denoiser's own marks (next test)
    assert denoise_rules(query) == denoise_reference.denoise_rules(query)


def test_the_denoisers_own_marks_in_a_query_are_dropped_not_read() -> None:
    """NUL and \\x01 stand for protected spans and emoji inside the denoiser; a query holding them
    (the plain implementation read "\\x00a\\x00" as a placeholder and failed) has them dropped."""
    assert denoise_rules('Hi, "x" \x00a\x00 1903 \x01 thanks') == '"x" a 1903'
    with pytest.raises(IndexError):
        denoise_reference.denoise_rules('Hi, "x" \x00a\x00 1903 thanks')


def test_more_protected_spans_than_one_placeholder_digit_holds() -> None:
    query = " ".join(str(i) for i in range(70_000))
    assert denoise_rules(query) == query

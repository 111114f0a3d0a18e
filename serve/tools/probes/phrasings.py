"""Independently written conversational noise, split in a development and a held-out half.

``steadyrank probe noise --noise dev|heldout`` measures the denoiser on these phrasings instead of the
measurement templates (:mod:`serve.tools.probes.noise`). The fragments (``data/phrasings_en.json``:
forum-style preambles, greetings, first-person context stories, hedging frames put before the query,
chatty asides, sign-offs, emoji) were written apart from those templates and before the denoiser was
tuned on them. Every fragment list and the queries are split in two halves by fixed seeds
(:data:`SPLIT_SEED`), so the ``heldout`` half shares neither a phrasing nor a query with ``dev``:
rules are tuned on ``dev`` only, and recovery is reported on ``heldout``.

Levels, as the templates' (0 clean, 2 moderate, 4 high):

* 2 — a greeting and a hedging frame before the query ("Hi folks, does anyone happen to know …"),
  or the frame before and a sign-off after it;
* 4 — a preamble, a greeting, a context story and a frame before the query; after it an aside (after
  a dash, in parentheses or as its own sentence), a sign-off and an emoji. One fragment in six gets a
  typo (two letters swapped or one dropped); fragments are lower-cased one time in five. The query
  itself is never changed, so all the loss is the noise's.
"""

from __future__ import annotations

import hashlib
import json
import random
from functools import cache
from importlib import resources

HALVES = ("dev", "heldout")
#: Seeds of the split (never changed once rules were tuned: a new split is a new development set).
SPLIT_SEED = "phrasings-split-2026"
KEYS = ("preambles", "greetings", "stories", "frames", "asides", "signoffs", "emoji")


@cache
def _fragments() -> dict[str, list[str]]:
    text = resources.files("steadyrank.serve.tools.probes").joinpath("data/phrasings_en.json").read_text("utf-8")
    data = json.loads(text)
    return {key: list(data[key]) for key in KEYS}


@cache
def fragments(half: str) -> dict[str, list[str]]:
    """The fragments of ``half`` (``dev`` or ``heldout``): each list shuffled under :data:`SPLIT_SEED`,
    its first half ``dev``, the rest ``heldout``."""
    if half not in HALVES:
        raise ValueError(f"half must be one of {HALVES}, got {half!r}")
    out = {}
    for key, items in _fragments().items():
        shuffled = sorted(items, key=lambda item: hashlib.sha256(f"{SPLIT_SEED}:{key}:{item}".encode()).hexdigest())
        middle = len(shuffled) // 2
        out[key] = shuffled[:middle] if half == "dev" else shuffled[middle:]
    return out


def query_half(query_id: str) -> str:
    """Which half a query belongs to (a fixed hash of its id)."""
    return HALVES[hashlib.sha256(f"{SPLIT_SEED}:query:{query_id}".encode()).digest()[0] % 2]


def _typo(text: str, rng: random.Random) -> str:
    words = text.split(" ")
    long = [i for i, w in enumerate(words) if len(w) >= 4 and w.isalpha()]
    if not long:
        return text
    i = rng.choice(long)
    word, k = words[i], rng.randrange(1, len(words[i]) - 1)
    words[i] = word[:k] + word[k + 1] + word[k] + word[k + 2:] if rng.random() < 0.5 else word[:k] + word[k + 1:]
    return " ".join(words)


def noisy(query: str, level: int, half: str, rng: random.Random) -> str:
    """``query`` at noise ``level`` (module docstring), fragments of ``half`` drawn from ``rng``."""
    if level not in (0, 2, 4):
        raise ValueError(f"noise level must be one of (0, 2, 4), got {level}")
    if level == 0:
        return query
    t = fragments(half)

    def pick(key: str) -> str:
        text = rng.choice(t[key])
        if key != "emoji" and rng.random() < 1 / 6:
            text = _typo(text, rng)
        return text.lower() if key != "emoji" and rng.random() < 0.2 else text

    if level == 2:
        if rng.random() < 0.5:
            return f"{pick('greetings')}, {pick('frames')} {query}"
        return f"{pick('frames')} {query}? {pick('signoffs')}"
    aside = pick("asides")
    after = rng.choice([f" — {aside}", f" ({aside})", f". {aside[:1].upper()}{aside[1:]}."])
    mark = rng.choice(["?", "", "??"])
    return (f"{pick('preambles')} {pick('greetings')}! {pick('stories')} {pick('frames')} {query}{mark}{after} "
            f"{pick('signoffs')} {pick('emoji')}")


def variants(queries: dict[str, str], half: str, seed: int, levels: tuple[int, ...]) -> dict[int, dict[str, str]]:
    """``{level: {query id: text}}`` over the queries of ``half``; each query's phrases depend only on
    (``seed``, ``half``, id, level)."""
    mine = {qid: text for qid, text in queries.items() if query_half(qid) == half}
    return {level: {qid: noisy(text, level, half, random.Random(f"{seed}:{half}:{qid}:{level}")) for qid, text in mine.items()}
            for level in levels}

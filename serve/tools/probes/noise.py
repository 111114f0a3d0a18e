"""Conversational noise of the paper's §4.4, for measurement: seeded noisy variants of a query.

Levels: 0 the clean query; 2 (moderate) a greeting and a filler before it; 4 (high) a greeting, an
apology and a filler before it, a digression, a sign-off and two emoji after it. Phrases come from
``data/noise_{lang}.json`` — measurement templates kept apart from, and written independently of,
the query denoiser's word lists, so the measurement is not the denoiser grading itself.
"""

from __future__ import annotations

import json
import random
from functools import cache
from importlib import resources

LEVELS = (0, 2, 4)
KEYS = ("greetings", "fillers", "apologies", "digressions", "signoffs", "emoji")


@cache
def noise_templates(lang: str) -> dict[str, list[str]]:
    """The measurement phrases of ``lang`` (``en`` or ``fr``)."""
    try:
        text = resources.files("steadyrank.serve.tools.probes").joinpath(f"data/noise_{lang}.json").read_text("utf-8")
    except FileNotFoundError:
        raise ValueError(f"no noise templates for language {lang!r}; known: en, fr") from None
    data = json.loads(text)
    return {k: list(data[k]) for k in KEYS}


def noisy(query: str, level: int, lang: str, rng: random.Random) -> str:
    """``query`` at noise ``level`` (module docstring), phrases drawn from ``rng``."""
    if level not in LEVELS:
        raise ValueError(f"noise level must be one of {LEVELS}, got {level}")
    if level == 0:
        return query
    t = noise_templates(lang)
    pick = lambda key: rng.choice(t[key])  # noqa: E731
    if level == 2:
        return f"{pick('greetings')} {pick('fillers')} {query}"
    return (f"{pick('greetings')} {pick('apologies')} {pick('fillers')} {query} — {pick('digressions')} "
            f"{pick('emoji')} {pick('signoffs')} {pick('emoji')}")


def variants(queries: dict[str, str], lang: str, seed: int, levels: tuple[int, ...] = LEVELS) -> dict[int, dict[str, str]]:
    """``{level: {query id: text}}``; each query's phrases depend only on (``seed``, ``lang``, id, level)."""
    return {level: {qid: noisy(text, level, lang, random.Random(f"{seed}:{lang}:{qid}:{level}"))
                    for qid, text in queries.items()} for level in levels}

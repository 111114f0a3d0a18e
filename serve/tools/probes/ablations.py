"""The ablations of the Δ-margin probes: each renders a bundle's query and five candidates.

Every ablation is a pure function of (bundle, templates, seed): the same inputs give the same texts.

=================  ====================================================================================
ablation           what changes (query Q and candidates C)
=================  ====================================================================================
base               nothing: the templates as given
mask               every author → the language's mask token (Q and C)
gibberish          every distinct author → a stable pseudo-random token (hash of seed and name; Q and C)
near_miss          impostors only: C2a = true name at Levenshtein 1, C2b at 2, C4's author at 3
remove_label       the author label ("Author:") deleted from every candidate
strip_diacritics   NFD, combining marks dropped, NFC (Q and C)
initials           "Alice Dupont" → "A. Dupont" (Q and C)
inversion          candidates only: "Dupont, Alice"
case_punct         lower case, punctuation removed (Q and C)
position_shift     candidates rendered author segment first
unicode_stress     Q in NFC; C in NFD with a narrow no-break space (U+202F) before ``:`` ``;`` ``!``
=================  ====================================================================================
"""

from __future__ import annotations

import hashlib
import random
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from steadyrank.serve.tools.probes.bundles import Bundle, Person
from steadyrank.serve.tools.probes.levenshtein import near_miss

ABLATIONS = ("base", "mask", "gibberish", "near_miss", "remove_label", "strip_diacritics", "initials",
             "inversion", "case_punct", "position_shift", "unicode_stress")
#: Ablations that destroy the name's identity (the paper: ΔΔ% −64 % to −100 %); the rest are light formatting.
IDENTITY_DESTROYING = ("mask", "gibberish", "near_miss")
NNBSP = "\u202f"


@dataclass(frozen=True)
class Rendered:
    """A bundle's texts under one ablation: the query and the candidates in :data:`SLOTS` order."""

    query: str
    candidates: tuple[str, ...]


NameFn = Callable[[Person], str]


def _render(bundle: Bundle, template: dict[str, str], *, query_name: NameFn = str, candidate_name: NameFn = str,
            names: dict[str, str] | None = None, author_first: bool = False) -> Rendered:
    """Texts from ``template``; ``names`` overrides the rendered author of some slots."""
    key = "candidate_author_first" if author_first else "candidate"
    texts = []
    for slot, (person, topic) in bundle.slots().items():
        author = (names or {}).get(slot, candidate_name(person))
        texts.append(template[key].format(author=author, topic=topic))
    return Rendered(template["query"].format(author=query_name(bundle.author), topic=bundle.topic), tuple(texts))


def _map(rendered: Rendered, query: Callable[[str], str], candidate: Callable[[str], str]) -> Rendered:
    return Rendered(query(rendered.query), tuple(candidate(t) for t in rendered.candidates))


def gibberish_token(name: str, seed: int) -> str:
    """A pronounceable 8-letter token, a function of (``seed``, ``name``) only."""
    digest = hashlib.sha256(f"{seed}\x00{name}".encode()).digest()
    consonants, vowels = "bcdfghjklmnprstvz", "aeiou"
    letters = [(consonants if i % 2 == 0 else vowels)[b % (17 if i % 2 == 0 else 5)] for i, b in enumerate(digest[:8])]
    return "".join(letters).capitalize()


def strip_diacritics(text: str) -> str:
    """NFD, combining marks (category Mn) dropped, NFC."""
    return unicodedata.normalize("NFC", "".join(c for c in unicodedata.normalize("NFD", text)
                                                if unicodedata.category(c) != "Mn"))


def initials(person: Person) -> str:
    """"Alice Dupont" → "A. Dupont"; a hyphenated given name keeps its hyphen ("J.-P. Martin")."""
    return "-".join(f"{part[0]}." for part in person.given.split("-") if part) + f" {person.family}"


def inverted(person: Person) -> str:
    """"Dupont, Alice"."""
    return f"{person.family}, {person.given}"


def case_punct(text: str) -> str:
    """Lower case, punctuation removed, spaces collapsed."""
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s'-]", " ", text.lower())).strip()


def unicode_stress_candidate(text: str) -> str:
    """NFD with U+202F before ``:`` ``;`` ``!`` (replacing a plain space there)."""
    return unicodedata.normalize("NFD", re.sub(r" ?([:;!])", NNBSP + r"\1", text))


def remove_label(text: str, label: str) -> str:
    """``label`` deleted, spaces collapsed."""
    return re.sub(r"\s+", " ", text.replace(label, " ")).strip()


def ablate(bundle: Bundle, ablation: str, templates: dict[str, dict[str, str]], seed: int = 0) -> Rendered:
    """``bundle`` rendered under ``ablation`` (module table) with its language's template."""
    if bundle.lang not in templates:
        raise ValueError(f"no templates for language {bundle.lang!r}")
    t = templates[bundle.lang]
    if ablation == "base":
        return _render(bundle, t)
    if ablation == "mask":
        return _render(bundle, t, query_name=lambda p: t["mask"], candidate_name=lambda p: t["mask"])
    if ablation == "gibberish":
        token = lambda p: gibberish_token(str(p), seed)  # noqa: E731
        return _render(bundle, t, query_name=token, candidate_name=token)
    if ablation == "near_miss":
        rng = random.Random(f"{seed}:{bundle.id}")
        true = str(bundle.author)
        names = {"C2a": near_miss(true, 1, rng), "C2b": near_miss(true, 2, rng), "C4": near_miss(true, 3, rng)}
        return _render(bundle, t, names=names)
    if ablation == "remove_label":
        return _map(_render(bundle, t), str, lambda c: remove_label(c, t["author_label"]))
    if ablation == "strip_diacritics":
        return _map(_render(bundle, t), strip_diacritics, strip_diacritics)
    if ablation == "initials":
        return _render(bundle, t, query_name=initials, candidate_name=initials)
    if ablation == "inversion":
        return _render(bundle, t, candidate_name=inverted)
    if ablation == "case_punct":
        return _map(_render(bundle, t), case_punct, case_punct)
    if ablation == "position_shift":
        return _render(bundle, t, author_first=True)
    if ablation == "unicode_stress":
        return _map(_render(bundle, t), lambda q: unicodedata.normalize("NFC", q), unicode_stress_candidate)
    raise ValueError(f"unknown ablation {ablation!r}; known: {', '.join(ABLATIONS)}")


def parse_ablations(text: str | None) -> tuple[str, ...]:
    """A comma-separated list of ablations (None: all); ``base`` is always included first."""
    chosen = ABLATIONS if not text else tuple(a.strip() for a in text.split(",") if a.strip())
    unknown = [a for a in chosen if a not in ABLATIONS]
    if unknown:
        raise ValueError(f"unknown ablation(s) {', '.join(unknown)}; known: {', '.join(ABLATIONS)}")
    return ("base",) + tuple(a for a in chosen if a != "base")



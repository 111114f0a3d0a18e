"""Query denoising before the search pipeline embeds or retrieves (``search.denoise``).

``rules``: Unicode NFC, whitespace collapsed, then conversational noise removed — greetings,
fillers, apologies, sign-offs (English and French, the word lists below) and emoji — while names,
numbers and quoted text are never touched:

* quoted spans (``"…"``, ``“…”``, ``«…»``) are set aside before anything else and restored verbatim;
* the text is cut into clauses at ``, . ! ? ; : … — –``; a noise phrase is removed only at the start
  or the end of a clause (not when it starts a run of capitalised words: "Bon Jovi"), and a clause
  is dropped only when nothing but noise and punctuation is left, so a clause holding a name or a
  number always survives (a word of the lists inside a clause stays).

The word lists are this module's own, written apart from the measurement templates of
``steadyrank probe noise`` (serve/probes/data), so that benchmark does not grade the lists against
themselves. ``llm`` (:mod:`retrieval.rewrite`) asks a chat model to restate the need and falls back
to ``rules``.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

DenoiseMode = Literal["off", "rules", "llm"]
DENOISE_MODES: tuple[str, ...] = ("off", "rules", "llm")

_GREETINGS = [
    r"(hi|hello|hey)( there| all| everyone| guys| folks| team)?", r"hiya", r"howdy", r"greetings",
    r"good (morning|afternoon|evening|day)( all| everyone)?", r"dear (all|team|sir|madam|colleagues)",
    r"bonjour( à tous| à toutes| tout le monde)?", r"bonsoir( à tous| tout le monde)?", r"salut( à tous| tout le monde)?",
    r"coucou( tout le monde)?", r"cher(e|s|es)? (collègues|amis)", r"bien le bonjour",
]
_FILLERS = [
    r"um+", r"uh+", r"erm+", r"hmm+", r"well", r"so", r"basically", r"actually", r"anyway", r"okay", r"ok",
    r"like", r"you know", r"i mean", r"i was wondering", r"i wonder", r"quick question", r"just curious",
    r"euh+", r"ben", r"bon", r"bref", r"en fait", r"du coup", r"genre", r"voilà", r"alors", r"enfin",
    r"je me demandais", r"petite question", r"tu vois", r"quoi",
]
_APOLOGIES = [
    r"sorry", r"so sorry", r"apologies", r"my apologies", r"excuse me", r"pardon( me)?",
    r"sorry (to|for) (bother(ing)?|disturb(ing)?|trouble|the trouble)( you| everyone| all)?",
    r"(sorry|apologies) (if|in case) this (is|sounds) (a )?(dumb|stupid|silly|basic|obvious) question",
    r"sorry for (the|my|this) (long|late|naive|basic) (message|post|question)",
    r"désolée?s?", r"navrée?s?", r"pardon", r"excusez-moi", r"excuse-moi", r"je m'excuse",
    r"désolée?s? de (vous|te) déranger", r"pardon (de|pour) (la|cette) question (bête|naïve)",
    r"(pardon|désolée?s?) si (la|ma|cette) question (est|paraît|semble) (bête|naïve|idiote|basique)",
    r"excusez-moi (pour|de) (le|ce) (long )?message",
]
_SIGNOFFS = [
    r"thanks?( you)?( so much| a lot| very much)?( in advance)?", r"thx", r"ty", r"cheers", r"regards",
    r"best( regards| wishes)?", r"kind regards", r"many thanks", r"much appreciated", r"have a (nice|good|great) day",
    r"merci( beaucoup| bien| mille fois)?( d'avance| par avance)?", r"cordialement", r"bien à vous",
    r"bonne (journée|soirée)", r"à (bientôt|plus)", r"je vous remercie", r"bisous",
]
_PHRASES = sorted(_GREETINGS + _FILLERS + _APOLOGIES + _SIGNOFFS, key=len, reverse=True)  # longest first
_NOISE = re.compile(r"(?:" + "|".join(f"(?:{p})" for p in _PHRASES) + r")(?![\w'’-])", re.IGNORECASE)
_EMOJI = re.compile(
    "[\U0001F000-\U0001FAFF\u2600-\u27BF\u2B00-\u2BFF\u2300-\u23FF\U0001F1E6-\U0001F1FF\uFE0F\u200D\u20E3]+"
    r"|(?<!\w)[:;]-?[()DPp](?!\w)"
)
#: Spans set aside verbatim: quoted text and numbers (with their internal separators: 2,000 / 3.5 / 10:30).
_PROTECTED = re.compile(r'"[^"]*"|“[^”]*”|«[^»]*»|„[^“”]*[“”]|\d+(?:[.,:/]\d+)*')
#: A capitalised word followed by another ("Bon Jovi", "Hey Jude"): a name, never noise.
_NAME_AHEAD = re.compile(r"[A-ZÀ-Ý][\w'’-]* [A-ZÀ-Ý]")
_CLAUSE = re.compile(r"(\s*[,.!?;:…—–]+\s*)")
_PLACEHOLDER = "\x00{}\x00"


def normalize(text: str) -> str:
    """NFC and whitespace collapsed to single spaces, ends stripped."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFC", text)).strip()


def _strip_noise(clause: str) -> str:
    """``clause`` without noise phrases at its start and its end (repeatedly)."""
    previous = None
    while clause != previous:
        previous = clause
        start = _NOISE.match(clause)
        if start and (start.end() == len(clause) or not clause[start.end()].isalnum()) and not _NAME_AHEAD.match(clause):
            clause = clause[start.end():].lstrip(" ,")
        for end in _NOISE.finditer(clause):
            if end.end() == len(clause) and (end.start() == 0 or not clause[end.start() - 1].isalnum()):
                clause = clause[:end.start()].rstrip(" ,")
                break
    return clause


def denoise_rules(text: str) -> str:
    """``text`` with conversational noise removed (module docstring). Falls back to the normalised
    text when nothing would be left."""
    clean = normalize(text)
    protected: list[str] = []

    def hide(match: re.Match[str]) -> str:
        protected.append(match.group(0))
        return _PLACEHOLDER.format(len(protected) - 1)

    hidden = re.sub(r"\s+", " ", _EMOJI.sub(" ", _PROTECTED.sub(hide, clean)))
    parts = _CLAUSE.split(hidden)
    out = ""
    for clause, separator in zip(parts[0::2], parts[1::2] + [""], strict=True):
        body = _strip_noise(clause.strip())
        if "\x00" in body or re.search(r"\w", body):
            out += body + separator
        elif out and separator.strip()[:1] in ("?", "!", ".") and out.rstrip()[-1:] not in "?!.":
            out = out.rstrip(" ,;:—–") + separator.rstrip()  # a dropped last clause keeps the end mark
    out = re.sub(r"\s+", " ", out).strip(" ,;:—–")
    out = re.sub(r"\x00(\d+)\x00", lambda m: protected[int(m.group(1))], out)
    return out or clean

"""Query denoising before the search pipeline embeds or retrieves (``search.denoise``).

``rules``: Unicode NFC, whitespace collapsed, then conversational noise removed — greetings,
fillers, apologies, sign-offs, interjections, meta-requests ("can you tell me"), emoji and emoticons
(English and French, :mod:`retrieval.denoise_lexicon`) — while names, numbers and quoted text are
never touched:

* quoted spans (``"…"``, ``“…”``, ``«…»``) and numbers are set aside before anything else and
  restored verbatim;
* the text is cut into clauses at ``, . ! ? ; : … — –`` and spaced hyphens; a noise phrase is removed
  only at the start or the end of a clause (not when it starts a run of capitalised words: "Bon
  Jovi"), and a clause is dropped only when it carries no content word — nothing left but
  punctuation, or only function words and noise words with at least one noise word ("sorry if my
  question is silly") — so a clause holding a name, a number or a content word survives;
* a **set-off personal aside** is dropped: a segment opened by a dash (``—``, ``–``, `` - ``) and
  running to the next sentence end or dash, written in the first person ("I", "my", "je", "mon"…),
  not a question (no ``?``, not opened by an interrogative word), holding no name, number or quote,
  and sharing no content word with the rest of the query (two words are shared when the shorter, of
  at least 3 letters, agrees with the longer on its first min(4, its length) letters: "print" and
  "printer"). "what is X — my coffee went cold" loses the remark; "how do I fix my printer — it jams
  when I print" keeps it. A first-person remark that is off the query's words but still relevant
  ("— I am on a budget") is dropped too: that is the limit of rules, which ``llm`` does not have.

The word lists are written apart from the measurement templates of ``steadyrank probe noise``
(serve/probes/data), so that benchmark does not grade the lists against themselves. ``llm``
(:mod:`retrieval.rewrite`) asks a chat model to restate the need and falls back to ``rules``.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

from steadyrank.retrieval.denoise_lexicon import FIRST_PERSON, INTERROGATIVE, NOISE, PHRASES, SET_OFF, START_ONLY, STOP

DenoiseMode = Literal["off", "rules", "llm"]
DENOISE_MODES: tuple[str, ...] = ("off", "rules", "llm")

_NOISE = re.compile(r"(?:" + "|".join(f"(?:{p})" for p in PHRASES) + r")(?![\w'’-])", re.IGNORECASE)
_SET_OFF = re.compile("|".join(SET_OFF), re.IGNORECASE)
_NOT_AT_END = re.compile("|".join(SET_OFF + START_ONLY), re.IGNORECASE)
_EMOJI = re.compile(
    "[\U0001F000-\U0001FAFF\u2600-\u27BF\u2B00-\u2BFF\u2300-\u23FF\U0001F1E6-\U0001F1FF\uFE0F\u200D\u20E3]+"
    r"|(?<![\w:/])(?:[:;=]['’-]?[()DPpOo/\\|*\]\[]+|<3+|\^[_.]?\^)(?!\w)"  # emoticons: :-) ;) :D <3 ^^
)
#: Spans set aside verbatim: quoted text (before emoji go) and numbers (after: "<3" is an emoticon),
#: with their internal separators: 2,000 / 3.5 / 10:30.
_QUOTED = re.compile(r'"[^"]*"|“[^”]*”|«[^»]*»|„[^“”]*[“”]')
_NUMBER = re.compile(r"\d+(?:[.,:/]\d+)*")
#: A capitalised word followed by another ("Bon Jovi", "Hey Jude"): a name, never noise.
_NAME_AHEAD = re.compile(r"[A-ZÀ-Ý][\w'’-]* [A-ZÀ-Ý]")
_CLAUSE = re.compile(r"(\s*[,.!?;:…—–\x01]+\s*|\s+-+\s+)")  # \x01: where an emoji was
_STRONG = re.compile(r"[.!?;…—–]|\s-+\s")  # a separator that ends a segment
_DASH = re.compile(r"[—–]|\s-+\s")  # a separator that opens a set-off segment
_EDGE_DASH = re.compile(r"^-+\s+|\s+-+$")  # a spaced hyphen left at an end (never a sign: "-5")
_WORD = re.compile(r"[^\W\d_]+")  # letters only: apostrophes and hyphens split ("j'ai" → j, ai)
#: A protected span's stand-in: its index as one private-use character (no digit, no letter) between NULs.
_PLACEHOLDER = re.compile("\x00(.)\x00")
_BASE = 0xF0000


def normalize(text: str) -> str:
    """NFC and whitespace collapsed to single spaces, ends stripped."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFC", text)).strip()


def _strip_noise(clause: str) -> str:
    """``clause`` without noise phrases at its start and its end (repeatedly); a ``SET_OFF`` phrase
    only as the whole clause or before another noise phrase, a ``START_ONLY`` one never at the end."""
    previous = None
    while clause != previous:
        previous = clause
        start = _NOISE.match(clause)
        if start and (start.end() == len(clause) or not clause[start.end()].isalnum()) and not _NAME_AHEAD.match(clause):
            rest = clause[start.end():].lstrip(" ,")
            if not rest or not _SET_OFF.fullmatch(start.group(0)) or _NOISE.match(rest):
                clause = rest
        for end in _NOISE.finditer(clause):
            if end.end() == len(clause) and (end.start() == 0 or not clause[end.start() - 1].isalnum()):
                if end.start() == 0 or not _NOT_AT_END.fullmatch(end.group(0)):
                    clause = clause[:end.start()].rstrip(" ,")
                break
    return clause


def _words(body: str) -> list[str]:
    """The letter runs of ``body``, case kept."""
    return _WORD.findall(body)


def _has_name(words: list[str]) -> bool:
    """A capitalised word after the first (but "I"): a name, which keeps its clause or aside."""
    return any(w[:1].isupper() and w != "I" for w in words[1:])


def _carries_content(body: str) -> bool:
    """Whether ``body`` holds a protected span, a name or a content word (module docstring)."""
    words = _words(body)
    if "\x00" in body or _has_name(words):
        return True
    lower = [w.lower() for w in words]
    return bool(lower) and not (all(w in STOP or w in NOISE for w in lower) and any(w in NOISE for w in lower))


def _content_words(bodies: list[str]) -> set[str]:
    """Lower-cased words of ``bodies`` of at least 3 letters that are neither function nor noise words."""
    return {w for body in bodies for w in (x.lower() for x in _words(body)) if len(w) >= 3 and w not in STOP and w not in NOISE}


def _shared(a: str, b: str) -> bool:
    """Whether two content words are the same word up to an ending: the shorter agrees with the longer
    on its first min(4, len(shorter)) letters."""
    short, long = sorted((a, b), key=len)
    n = min(4, len(short))
    return short[:n] == long[:n]


def _is_aside(bodies: list[str], end_separator: str, rest: set[str]) -> bool:
    """Whether a dash-opened segment (its clause ``bodies``) is a personal aside (module docstring)."""
    text = " ".join(bodies)
    words = _words(text)
    lower = [w.lower() for w in words]
    if not lower or "\x00" in text or "?" in end_separator or lower[0] in INTERROGATIVE or _has_name(words):
        return False
    own = _content_words(bodies)
    return (any(w in FIRST_PERSON for w in lower) and bool(rest)
            and not any(_shared(a, b) for a in own for b in rest))


def _drop_asides(bodies: list[str], keep: list[bool], separators: list[str]) -> list[bool]:
    """``keep`` with the clauses of every personal aside set False. Segments run between strong
    separators; one opened by a dash is a candidate."""
    segments: list[list[int]] = [[0]]
    set_off = [False]
    for i in range(1, len(bodies)):
        if _STRONG.search(separators[i - 1]):
            segments.append([])
            set_off.append(bool(_DASH.search(separators[i - 1])))
        segments[-1].append(i)
    out = list(keep)
    for segment, dashed in zip(segments, set_off, strict=True):
        kept = [i for i in segment if keep[i]]
        if not dashed or not kept:
            continue
        rest = _content_words([bodies[i] for i in range(len(bodies)) if keep[i] and i not in segment])
        if _is_aside([bodies[i] for i in kept], separators[segment[-1]], rest):
            for i in segment:
                out[i] = False
    return out


def denoise_rules(text: str) -> str:
    """``text`` with conversational noise removed (module docstring). Falls back to the normalised
    text when nothing would be left."""
    clean = normalize(text)
    protected: list[str] = []

    def hide(match: re.Match[str]) -> str:
        protected.append(match.group(0))
        return f"\x00{chr(_BASE + len(protected) - 1)}\x00"

    hidden = re.sub(r"\s+", " ", _NUMBER.sub(hide, _EMOJI.sub("\x01", _QUOTED.sub(hide, clean))))
    parts = _CLAUSE.split(hidden)
    bodies = [_strip_noise(clause.strip()) for clause in parts[0::2]]
    separators = parts[1::2] + [""]
    keep = _drop_asides(bodies, [_carries_content(body) for body in bodies], separators)
    out = ""
    for body, separator, kept in zip(bodies, [sep.replace("\x01", " ") for sep in separators], keep, strict=True):
        if kept:
            out += body + separator
        elif out and separator.strip()[:1] in ("?", "!", ".") and out.rstrip()[-1:] not in "?!.":
            out = _EDGE_DASH.sub("", out.rstrip(" ,;:—–")) + separator.rstrip()  # a dropped last clause keeps the end mark
    out = _EDGE_DASH.sub("", re.sub(r"\s+", " ", out).strip(" ,;:—–"))
    out = _PLACEHOLDER.sub(lambda m: protected[ord(m.group(1)) - _BASE], out)
    return out or clean

"""The ``rules`` denoiser written the plain way, as the brute-force reference of
:mod:`retrieval.denoise`: the same rules and word lists (imported from the module), applied by
rescanning — a clause is searched again after every phrase taken off it, the words of every other
clause are gathered again for every segment and compared pairwise, quoted spans are
found by a backtracking regular expression, the output is re-stripped as a whole string. It is the
implementation before issue 36 (quadratic in the query's length), kept only to check the linear one
against it; never import it outside the tests.
"""

from __future__ import annotations

import re

from steadyrank.retrieval.denoise import (
    _CLAUSE,
    _EDGE_DASH,
    _EMOJI,
    _GREETING,
    _NAME_AHEAD,
    _NOISE,
    _NOT_AT_END,
    _NUMBER,
    _SET_OFF,
    MIN_REST,
    SHORT_REMARK,
    _balanced,
    _carries_content,
    _has_name,
    _personal,
    _segments,
    _strip_frame,
    _words,
    normalize,
)
from steadyrank.retrieval.denoise import _content_words as _module_content_words
from steadyrank.retrieval.denoise_lexicon import INTERROGATIVE

_QUOTED = re.compile(r'"[^"]*"|“[^”]*”|«[^»]*»|„[^“”]*[“”]')
_PLACEHOLDER = re.compile("\x00(.)\x00")
_BASE = 0xF0000


def _strip_noise(clause: str) -> str:
    previous = None
    greeted = opened = False
    while clause != previous:
        previous = clause
        start = _NOISE.match(clause)
        if start and (start.end() == len(clause) or not clause[start.end()].isalnum()) and not _NAME_AHEAD.match(clause):
            rest = clause[start.end():].lstrip(" ,")
            if not rest or not _SET_OFF.fullmatch(start.group(0)) or _NOISE.match(rest):
                greeted = greeted or (not opened and bool(_GREETING.fullmatch(start.group(0))))
                opened = True
                clause = rest
        for end in _NOISE.finditer(clause):
            if end.end() == len(clause) and (end.start() == 0 or not clause[end.start() - 1].isalnum()):
                if end.start() == 0 or not _NOT_AT_END.fullmatch(end.group(0)):
                    clause = clause[:end.start()].rstrip(" ,")
                break
    if greeted and clause == clause.lower() and "\x00" not in clause and len(_words(clause)) <= 2:
        return ""
    return clause


def _content_words(bodies: list[str]) -> list[str]:
    """Each body's content words, body after body (a word counts once per body)."""
    return [w for body in bodies for w in sorted(_module_content_words(body))]


def _shared(a: str, b: str) -> bool:
    short, long = sorted((a, b), key=len)
    n = min(4, len(short))
    return short[:n] == long[:n]


def _is_aside(bodies: list[str], end_separator: str, rest: list[str], needed: int, after_question: bool) -> bool:
    text = " ".join(bodies)
    words = _words(text)
    lower = [w.lower() for w in words]
    if not lower or "\x00" in text or "?" in end_separator or lower[0] in INTERROGATIVE or _has_name(words):
        return False
    own = set(_content_words(bodies))
    remark = _personal(bodies) or (after_question and len(lower) <= SHORT_REMARK)
    return remark and len(rest) >= needed and not any(_shared(a, b) for a in own for b in rest)


def _drop_asides(bodies: list[str], keep: list[bool], separators: list[str]) -> list[bool]:
    out = list(keep)
    asked = False
    for segment, dashed in _segments(separators):
        kept = [i for i in segment if keep[i]]
        if not kept:
            continue
        rest = _content_words([bodies[i] for i in range(len(bodies)) if out[i] and i not in segment])
        end = separators[segment[-1]]
        if _is_aside([bodies[i] for i in kept], end, rest, 1 if dashed else MIN_REST, asked):
            for i in segment:
                out[i] = False
            continue
        asked = asked or "?" in end
    return out


def denoise_rules(text: str) -> str:
    clean = normalize(text)
    protected: list[str] = []

    def hide(match: re.Match[str]) -> str:
        protected.append(match.group(0))
        return f"\x00{chr(_BASE + len(protected) - 1)}\x00"

    hidden = re.sub(r"\s+", " ", _NUMBER.sub(hide, _EMOJI.sub("\x01", _QUOTED.sub(hide, clean))))
    parts = _CLAUSE.split(hidden)
    bodies = [_strip_frame(_strip_noise(clause.strip())) for clause in parts[0::2]]
    separators = parts[1::2] + [""]
    keep = _drop_asides(bodies, [_carries_content(body) for body in bodies], separators)
    out = ""
    for body, separator, kept in zip(bodies, [sep.replace("\x01", " ") for sep in separators], keep, strict=True):
        if kept:
            out += body + separator
        elif out and separator.strip()[:1] in ("?", "!", ".") and out.rstrip()[-1:] not in "?!.":
            out = _EDGE_DASH.sub("", out.rstrip(" ,;:—–(")) + separator.rstrip()
    out = _EDGE_DASH.sub("", re.sub(r"\s+", " ", out).strip(" ,;:—–"))
    out = _balanced(out) if not all(keep) else out
    out = _PLACEHOLDER.sub(lambda m: protected[ord(m.group(1)) - _BASE], out)
    return out or clean

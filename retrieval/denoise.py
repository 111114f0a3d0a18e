"""Query denoising before the search pipeline embeds or retrieves (``search.denoise``).

``rules``: Unicode NFC, whitespace collapsed, then conversational noise removed — greetings,
fillers, apologies, sign-offs, interjections, meta-requests ("can you tell me"), emoji and emoticons
(English and French, :mod:`retrieval.denoise_lexicon`) — while names, numbers and quoted text are
never touched:

* quoted spans (``"…"``, ``“…”``, ``«…»``) and numbers are set aside before anything else and
  restored verbatim;
* the text is cut into clauses at ``, . ! ? ; : … — –`` and spaced hyphens; a noise phrase (starting
  a word: "Delhi" holds no "hi") is removed only at the start or the end of a clause (not when it
  starts a run of capitalised words: "Bon Jovi"), and a clause is dropped only when it carries no content word — nothing left but
  punctuation, or only function words and noise words with at least one noise word ("sorry if my
  question is silly") — so a clause holding a name, a number or a content word survives;
* a greeting takes its addressee with it when at most two lower-case words remain ("Hello wonderful
  people"); a clause opening with a **request about the asking** (function, noise and ``ASKING`` /
  ``FRAME`` words, one of them asking) loses it up to its last hinge ("would love some input on …")
  or up to the question it frames (:func:`_strip_frame`);
* a **personal remark** is dropped: a segment (running between ``. ! ? ; …``, dashes and
  parentheses) where the writer speaks ("I", "my", "this", "je", "mon"…: ``PERSONAL``) in every
  clause that carries content, not a question (no ``?``, not opened by an interrogative word),
  holding no name, number or quote, and sharing no content word with the rest of the query (two
  words are shared when the shorter, of at least 3 letters, agrees with the longer on its first
  min(4, its length) letters: "print" and "printer"), when the rest keeps ``MIN_REST`` content words
  (one after a dash); so is a remark of at most ``SHORT_REMARK`` words after a question. Segments are
  judged in order; a dropped one no longer counts for the next. "what is X — my coffee went cold"
  loses the remark; "how do I fix my printer — it jams when I print" keeps it. A first-person remark
  that is off the query's words but still relevant ("is ibuprofen safe? I am pregnant") is dropped
  too: that is the limit of rules, which ``llm`` does not have, and why ``off`` is the default.

The ``ASKING``/``FRAME``/``PERSONAL`` rules were tuned on the development half of independent
phrasings (serve/tools/probes/phrasings.py) and measured on the held-out half (docs/guides/probes.md).

Cost: linear in the query's length (one scan per clause for its phrases, word counts for the asides;
tests/retrieval/test_denoise_cost.py), a few milliseconds at 4,000 characters — which is why the
search pipeline runs it on a worker thread, never on the event loop.

The word lists are written apart from the measurement templates of ``steadyrank probe noise``
(serve/tools/probes/data), so that benchmark does not grade the lists against themselves. ``llm``
(:mod:`retrieval.rewrite`) asks a chat model to restate the need and falls back to ``rules``.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from typing import Literal

from steadyrank.retrieval.denoise_lexicon import (
    ADDRESSING,
    ASKING,
    FRAME,
    GREETINGS,
    HINGES,
    INTERROGATIVE,
    NOISE,
    PERSONAL,
    PHRASES,
    SET_OFF,
    START_ONLY,
    STOP,
    WH,
)

DenoiseMode = Literal["off", "rules", "llm"]
DENOISE_MODES: tuple[str, ...] = ("off", "rules", "llm")
#: The default of ``search.denoise`` and of ``steadyrank search --denoise``: the query as the user sent it.
#: ``rules`` rewrites silently and misreads some queries (docs/guides/probes.md, "The default: off").
DEFAULT_DENOISE: DenoiseMode = "off"

#: A noise phrase starting a word (not after a letter or digit: "also sorry" holds no "so sorry") and
#: ending one.
_NOISE = re.compile(r"(?<![^\W_])(?:" + "|".join(f"(?:{p})" for p in PHRASES) + r")(?![\w'’-])", re.IGNORECASE)
_SET_OFF = re.compile("|".join(SET_OFF), re.IGNORECASE)
_GREETING = re.compile("|".join(GREETINGS), re.IGNORECASE)
_NOT_AT_END = re.compile("|".join(SET_OFF + START_ONLY), re.IGNORECASE)
_EMOJI = re.compile(
    "[\U0001F000-\U0001FAFF\u2600-\u27BF\u2B00-\u2BFF\u2300-\u23FF\U0001F1E6-\U0001F1FF\uFE0F\u200D\u20E3]+"
    r"|(?<![\w:/])(?:[:;=]['’-]?[()DPpOo/\\|*\]\[]+|<3+|\^[_.]?\^)(?!\w)"  # emoticons: :-) ;) :D <3 ^^
)
#: Spans set aside verbatim: quoted text (before emoji go: opening mark → its closing marks) and
#: numbers (after: "<3" is an emoticon), with their internal separators: 2,000 / 3.5 / 10:30.
_QUOTES = {'"': '"', "“": "”", "«": "»", "„": "“”"}
_OPENING = re.compile("[" + "".join(_QUOTES) + "]")
_NUMBER = re.compile(r"\d+(?:[.,:/]\d+)*")
#: A capitalised word followed by another ("Bon Jovi", "Hey Jude"): a name, never noise.
_NAME_AHEAD = re.compile(r"[A-ZÀ-Ý][\w'’-]* [A-ZÀ-Ý]")
_CLAUSE = re.compile(r"(\s*[,.!?;:…—–()\x01]+\s*|\s+-+\s+)")  # \x01: where an emoji was
_STRONG = re.compile(r"[.!?;…—–()]|\s-+\s")  # a separator that ends a segment
_DASH = re.compile(r"[—–]|\s-+\s")  # a separator that opens a set-off segment
_EDGE_DASH = re.compile(r"^-+\s+|\s+-+$")  # a spaced hyphen left at an end (never a sign: "-5")
_TRAILING_DASH = re.compile(r"\s+-+$")
_WORD = re.compile(r"[^\W\d_]+")  # letters only: apostrophes and hyphens split ("j'ai" → j, ai)
#: A word with its apostrophes ("i've"), as the frame rule reads it.
_SPELLED = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
#: A segment needs this many content words elsewhere in the query before it may go as a personal remark.
MIN_REST = 2
#: Words at most of a remark after a question that goes without a personal word ("long story").
SHORT_REMARK = 4
#: A protected span's stand-in: its index in base 2¹⁶, written in private-use characters (no digit, no
#: letter), between NULs. NUL and \x01 are the denoiser's own marks: dropped from the query first.
_PLACEHOLDER = re.compile("\x00([\U000F0000-\U000FFFFF]+)\x00")
_BASE = 0xF0000
_MARKS = str.maketrans("", "", "\x00\x01")


def normalize(text: str) -> str:
    """NFC and whitespace collapsed to single spaces, ends stripped."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFC", text)).strip()


def _strip_noise(clause: str) -> str:
    """``clause`` without noise phrases at its start and its end (repeatedly); a ``SET_OFF`` phrase
    only as the whole clause or before another noise phrase, a ``START_ONLY`` one never at the end.

    One scan finds the clause's noise phrases left to right (``tokens``); the clause then shrinks as
    a window ``clause[lo:hi]`` holding ``tokens[i:j]``: every step takes a phrase off one end, so the
    work is linear in the clause's length."""
    tokens = list(_NOISE.finditer(clause))
    lo, hi, i, j = 0, len(clause), 0, len(tokens)
    names: dict[int, int] = {}  # window start → end of the "Name Name" opening it there (-1: none)
    greeted = False  # a greeting opened the clause
    changed = True
    while changed:
        changed = False
        if i < j and tokens[i].start() == lo:
            start = tokens[i]
            if lo not in names:
                name = _NAME_AHEAD.match(clause, lo)
                names[lo] = name.end() if name else -1
            if (start.end() == hi or not clause[start.end()].isalnum()) and not 0 <= names[lo] <= hi:
                rest = start.end()
                while rest < hi and clause[rest] in " ,":
                    rest += 1
                if rest == hi or not _SET_OFF.fullmatch(start.group(0)) or (i + 1 < j and tokens[i + 1].start() == rest):
                    greeted = greeted or (lo == 0 and bool(_GREETING.fullmatch(start.group(0))))
                    lo, i, changed = rest, i + 1, True
        if i < j:
            end = tokens[j - 1]
            if end.end() == hi and (end.start() == lo or not clause[end.start() - 1].isalnum()):
                if end.start() == lo or not _NOT_AT_END.fullmatch(end.group(0)):
                    hi, j, changed = end.start(), j - 1, True
                    while hi > lo and clause[hi - 1] in " ,":
                        hi -= 1
    rest = clause[lo:hi]
    if greeted and rest == rest.lower() and "\x00" not in rest and len(_words(rest)) <= 2:
        return ""  # what a greeting addressed: "hello wonderful people", "hey reddit"
    return rest


def _strip_frame(body: str) -> str:
    """``body`` without an opening request about the asking (module docstring): a run of function,
    noise, ``ASKING`` and ``FRAME`` words holding an ``ASKING`` one, cut after its last ``HINGE``
    ("would love some input on …"; a run opened by a ``WH`` word needs a ``PERSONAL`` or ``ADDRESSING``
    one too: "how to learn about" stays), or, with such a word and no ``WH`` opening,
    before the first interrogative word after the asking or the first word outside the run ("I was
    wondering causes of …"). Kept whole when the rest would carry no content."""
    asking = personal = False
    opened_by_question = None
    cut = -1
    for match in _SPELLED.finditer(body):
        parts = [w.lower() for w in _WORD.findall(match.group(0))]
        if opened_by_question is None:
            opened_by_question = parts[0] in WH
        if asking and personal and parts[0] in INTERROGATIVE:
            cut = match.start()
            break
        if any(w not in STOP and w not in NOISE and w not in ASKING and w not in FRAME and w not in HINGES for w in parts):
            if asking and personal and cut < 0 and not opened_by_question:
                cut = match.start()
            break
        asking = asking or any(w in ASKING for w in parts)
        personal = personal or any(w in PERSONAL or w in ADDRESSING for w in parts)
        if asking and parts[-1] in HINGES and (personal or not opened_by_question):
            cut = match.end()
    else:
        return body  # nothing but request words: the clause rule decides
    rest = body[cut:].lstrip(" :") if cut >= 0 else body
    return rest if rest != body and _carries_content(rest) else body


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


def _content_words(body: str) -> set[str]:
    """Lower-cased words of ``body`` of at least 3 letters that are neither function, noise nor asking words."""
    return {w for w in (x.lower() for x in _words(body)) if len(w) >= 3 and w not in STOP and w not in NOISE and w not in ASKING}


class _Vocabulary:
    """Content words, counted under the keys through which another word shares them: two words are
    shared when the shorter agrees with the longer on its first min(4, len(shorter)) letters
    (module docstring), so a word of 3 letters is found by its own letters among the first three
    of every word, a longer one by its first three among the 3-letter words or by its first four
    among the longer ones. Taking a segment's words out and putting them back costs their number."""

    def __init__(self) -> None:
        self.keys: Counter[tuple[int, str]] = Counter()
        self.size = 0

    @staticmethod
    def _keys(word: str) -> tuple[tuple[int, str], ...]:
        return ((3, word[:3]), (0, word)) if len(word) == 3 else ((3, word[:3]), (4, word[:4]))

    def add(self, words: set[str], count: int = 1) -> None:
        for word in words:
            self.keys.update(dict.fromkeys(self._keys(word), count))
        self.size += count * len(words)

    def shares(self, word: str) -> bool:
        """Whether a counted word is the same as ``word`` up to an ending."""
        if len(word) == 3:
            return self.keys[(3, word)] > 0
        return self.keys[(0, word[:3])] > 0 or self.keys[(4, word[:4])] > 0


def _personal(bodies: list[str]) -> bool:
    """Whether the writer speaks in every clause of ``bodies`` that carries a content word (one
    without: "help me out here: lps laws definition" is a request, not a remark)."""
    said = [{w.lower() for w in _words(body)} for body in bodies]
    return any(words & PERSONAL for words in said) and all(
        words & PERSONAL for body, words in zip(bodies, said, strict=True) if _content_words(body))


def _is_aside(bodies: list[str], end_separator: str, rest: _Vocabulary, needed: int, after_question: bool) -> bool:
    """Whether a segment (its clause ``bodies``) is a personal remark (:func:`_personal`), or a short remark
    (``SHORT_REMARK`` words at most) after a question (module docstring); ``rest``: the content words
    of the query's other kept clauses, of which it needs ``needed``."""
    text = " ".join(bodies)
    words = _words(text)
    lower = [w.lower() for w in words]
    if not lower or "\x00" in text or "?" in end_separator or lower[0] in INTERROGATIVE or _has_name(words):
        return False
    own = {w for body in bodies for w in _content_words(body)}
    remark = _personal(bodies) or (after_question and len(lower) <= SHORT_REMARK)
    return remark and rest.size >= needed and not any(rest.shares(w) for w in own)


def _segments(separators: list[str]) -> list[tuple[list[int], bool]]:
    """The clauses (indices) of each segment, and whether a dash opens it: segments run between
    strong separators; ``separators[i]`` follows clause ``i``."""
    out: list[tuple[list[int], bool]] = [([0], False)]
    for i in range(1, len(separators)):
        if _STRONG.search(separators[i - 1]):
            out.append(([], bool(_DASH.search(separators[i - 1]))))
        out[-1][0].append(i)
    return out


def _drop_asides(bodies: list[str], keep: list[bool], separators: list[str]) -> list[bool]:
    """``keep`` with the clauses of every personal remark set False, segment by segment from the
    first; a dropped segment's words no longer count for the next. A dash-opened segment needs one
    content word elsewhere, any other ``MIN_REST``."""
    words: list[set[str]] = [_content_words(body) if kept else set() for body, kept in zip(bodies, keep, strict=True)]
    vocabulary = _Vocabulary()
    for own in words:
        vocabulary.add(own)
    out = list(keep)
    asked = False  # a kept segment before this one ended in a question mark
    for segment, dashed in _segments(separators):
        kept = [i for i in segment if keep[i]]
        if not kept:
            continue
        for i in kept:
            vocabulary.add(words[i], -1)
        end = separators[segment[-1]]
        if _is_aside([bodies[i] for i in kept], end, vocabulary, 1 if dashed else MIN_REST, asked):
            for i in segment:
                out[i] = False
            continue
        for i in kept:
            vocabulary.add(words[i])
        asked = asked or "?" in end
    return out


def _stand_in(index: int) -> str:
    """The placeholder of the protected span number ``index`` (``_PLACEHOLDER``)."""
    digits: list[str] = []
    while True:
        index, digit = divmod(index, 0x10000)
        digits.append(chr(_BASE + digit))
        if not index:
            return "\x00" + "".join(reversed(digits)) + "\x00"


def _index(stand_in: str) -> int:
    """The span number a placeholder's digits write (the inverse of :func:`_stand_in`)."""
    index = 0
    for digit in stand_in:
        index = index * 0x10000 + ord(digit) - _BASE
    return index


def _hide_quoted(text: str, hide: Callable[[str], str]) -> str:
    """``text`` with every quoted span (an opening mark to the first of its closing marks after it)
    replaced by ``hide(span)``, left to right. An opening mark with no closing mark after it stays;
    the search for each closing mark only moves forward, so the scan is linear."""
    ahead: dict[str, int] = {}  # closing mark → its first position at or after the last search (-1: none)

    def closing(marks: str, after: int) -> int:
        for mark in marks:
            if 0 <= ahead.get(mark, after - 1) < after:
                ahead[mark] = text.find(mark, after)
        return min((ahead[m] for m in marks if ahead[m] >= 0), default=-1)

    out: list[str] = []
    done = 0
    for opening in _OPENING.finditer(text):
        if opening.start() < done:
            continue
        close = closing(_QUOTES[opening.group(0)], opening.end())
        if close >= 0:
            out += [text[done:opening.start()], hide(text[opening.start():close + 1])]
            done = close + 1
    return "".join(out) + text[done:]


def _assemble(bodies: list[str], separators: list[str], keep: list[bool]) -> str:
    """The kept clauses with their separators; a dropped clause ending in ``? ! .`` hands its end mark
    to the text before it (unless that already ends in one)."""
    pieces: list[str] = []
    for body, separator, kept in zip(bodies, separators, keep, strict=True):
        separator = separator.replace("\x01", " ")
        if kept:
            pieces.append(body + separator)
        elif pieces and separator.strip()[:1] in ("?", "!", ".") and pieces[-1].rstrip()[-1:] not in "?!.":
            pieces[-1] = _TRAILING_DASH.sub("", pieces[-1].rstrip(" ,;:—–(")) + separator.rstrip()
    out = _EDGE_DASH.sub("", re.sub(r"\s+", " ", "".join(pieces)).strip(" ,;:—–"))
    return _balanced(out) if not all(keep) else out


def _balanced(text: str) -> str:
    """``text`` without the parentheses left unmatched (a dropped clause took their partner), spaces
    tidied around where they were."""
    unmatched: set[int] = set()
    opened: list[int] = []
    for i, char in enumerate(text):
        if char == "(":
            opened.append(i)
        elif char == ")":
            if opened:
                opened.pop()
            else:
                unmatched.add(i)
    unmatched.update(opened)
    if not unmatched:
        return text
    kept = "".join(char for i, char in enumerate(text) if i not in unmatched)
    return re.sub(r"\s+", " ", kept).strip(" ,;:—–")


def denoise_rules(text: str) -> str:
    """``text`` with conversational noise removed (module docstring). Falls back to the normalised
    text when nothing would be left. Linear in the length of ``text``."""
    clean = normalize(text)
    protected: list[str] = []

    def hide(span: str) -> str:
        protected.append(span)
        return _stand_in(len(protected) - 1)

    hidden = _hide_quoted(clean.translate(_MARKS), hide)
    hidden = re.sub(r"\s+", " ", _NUMBER.sub(lambda m: hide(m.group(0)), _EMOJI.sub("\x01", hidden)))
    parts = _CLAUSE.split(hidden)
    bodies = [_strip_frame(_strip_noise(clause.strip())) for clause in parts[0::2]]
    separators = parts[1::2] + [""]
    keep = _drop_asides(bodies, [_carries_content(body) for body in bodies], separators)
    out = _PLACEHOLDER.sub(lambda m: protected[_index(m.group(1))], _assemble(bodies, separators, keep))
    return out or clean

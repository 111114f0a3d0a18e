"""Δ-margin probe bundles (the paper's §4.2): per query, five candidates.

C1 correct author + correct topic; C2a, C2b wrong author + correct topic (impostors); C3 correct
author + wrong topic; C4 wrong author + wrong topic. Bundles are generated deterministically from a
seed (person names from Faker's ``en_US``/``fr_FR`` locales, topics from a list), or read from a JSONL
bundle file (one :meth:`Bundle.to_json` object a line). Texts are rendered from templates
(``data/templates.json``, editable: ``--templates FILE`` with the same keys).
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from steadyrank.metrics.io import read_jsonl

#: Candidate slots, in the order similarities are reported.
SLOTS = ("C1", "C2a", "C2b", "C3", "C4")
LANGUAGES = ("en", "fr")
FAKER_LOCALES = {"en": "en_US", "fr": "fr_FR"}
TEMPLATE_KEYS = ("query", "candidate", "candidate_author_first", "author_label", "mask")


@dataclass(frozen=True)
class Person:
    """A person name as given and family names (``str``: ``"given family"``)."""

    given: str
    family: str

    def __str__(self) -> str:
        return f"{self.given} {self.family}"


@dataclass(frozen=True)
class Bundle:
    """One probe query: ``author`` wrote ``topic``; ``impostors`` (C2a, C2b) did not; ``other``
    is C4's author; ``wrong_topic`` is C3's and C4's topic."""

    id: str
    lang: str
    author: Person
    impostors: tuple[Person, Person]
    other: Person
    topic: str
    wrong_topic: str

    def slots(self) -> dict[str, tuple[Person, str]]:
        """(author, topic) of every candidate slot."""
        return {"C1": (self.author, self.topic), "C2a": (self.impostors[0], self.topic),
                "C2b": (self.impostors[1], self.topic), "C3": (self.author, self.wrong_topic),
                "C4": (self.other, self.wrong_topic)}

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Bundle:
        person = lambda p: Person(str(p["given"]), str(p["family"]))  # noqa: E731
        return cls(str(data["id"]), str(data["lang"]), person(data["author"]),
                   (person(data["impostors"][0]), person(data["impostors"][1])), person(data["other"]),
                   str(data["topic"]), str(data["wrong_topic"]))


def default_templates() -> dict[str, dict[str, str]]:
    """The shipped templates per language (the paper's label-first layout, title before author)."""
    return json.loads(resources.files("steadyrank.serve.tools.probes").joinpath("data/templates.json").read_text("utf-8"))


def load_templates(path: str | Path | None) -> dict[str, dict[str, str]]:
    """Templates from ``path`` (JSON ``{lang: {query, candidate, candidate_author_first, author_label,
    mask}}``) or the shipped defaults; ``query`` needs ``{author}`` and ``{topic}``."""
    templates = default_templates() if path is None else json.loads(Path(path).read_text("utf-8"))
    for lang, entry in templates.items():
        missing = [k for k in TEMPLATE_KEYS if k not in entry]
        if missing:
            raise ValueError(f"templates for {lang!r} lack {', '.join(missing)}")
        for key in ("query", "candidate", "candidate_author_first"):
            if "{author}" not in entry[key] or "{topic}" not in entry[key]:
                raise ValueError(f"template {lang}.{key} needs {{author}} and {{topic}}: {entry[key]!r}")
    return templates


def default_topics(lang: str) -> list[str]:
    """The shipped topic list of ``lang`` (30 topics)."""
    text = resources.files("steadyrank.serve.tools.probes").joinpath(f"data/topics_{lang}.txt").read_text("utf-8")
    return [line.strip() for line in text.splitlines() if line.strip()]


def read_topics(path: str | Path) -> list[str]:
    """Topics from a text file (one a line) or a BEIR corpus (``corpus.jsonl`` or its folder: the
    distinct non-empty titles)."""
    path = Path(path)
    corpus = path / "corpus.jsonl" if path.is_dir() else path
    if corpus.suffix == ".jsonl":
        titles = dict.fromkeys(str(r.get("title") or "").strip() for _, r in read_jsonl(corpus))
        topics = [t for t in titles if t]
    else:
        topics = [line.strip() for line in path.read_text("utf-8").splitlines() if line.strip()]
    if len(topics) < 2:
        raise ValueError(f"{path}: need at least 2 topics (non-empty titles or lines), found {len(topics)}")
    return topics


def generate(n: int, lang: str, seed: int, topics: list[str] | None = None, *, run: int = 0) -> list[Bundle]:
    """``n`` bundles in ``lang``, a deterministic function of (``seed``, ``run``, ``lang``, ``topics``):
    four distinct Faker names per bundle, the topic and a different wrong topic drawn from ``topics``
    (default :func:`default_topics`)."""
    from faker import Faker

    if lang not in FAKER_LOCALES:
        raise ValueError(f"unknown language {lang!r}; known: {', '.join(FAKER_LOCALES)}")
    topics = default_topics(lang) if topics is None else topics
    if len(topics) < 2:
        raise ValueError("need at least 2 topics")
    fake = Faker(FAKER_LOCALES[lang])
    fake.seed_instance(seed * 1000 + run * 2 + LANGUAGES.index(lang))
    rng = random.Random(f"{seed}:{run}:{lang}")
    bundles = []
    for i in range(n):
        people: list[Person] = []
        while len(people) < 4:
            person = Person(fake.first_name(), fake.last_name())
            if all(person.family != p.family and person.given != p.given for p in people):
                people.append(person)
        topic, wrong = rng.sample(topics, 2)
        bundles.append(Bundle(f"{lang}-r{run}-q{i}", lang, people[0], (people[1], people[2]), people[3], topic, wrong))
    return bundles


def read_bundles(path: str | Path) -> list[Bundle]:
    """Bundles from a JSONL file (one :meth:`Bundle.to_json` object a line)."""
    out = []
    for line, record in read_jsonl(path):
        try:
            out.append(Bundle.from_json(record))
        except (KeyError, IndexError, TypeError) as exc:
            raise ValueError(f"{path}:{line}: not a probe bundle ({type(exc).__name__}: {exc})") from None
    if not out:
        raise ValueError(f"{path}: no bundles")
    return out

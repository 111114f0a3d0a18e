"""Probe bundles and ablations: deterministic per seed, and each does what its name says."""

from __future__ import annotations

import unicodedata

import pytest

from steadyrank.serve.tools.probes.ablations import ABLATIONS, NNBSP, ablate, gibberish_token, initials, parse_ablations
from steadyrank.serve.tools.probes.bundles import Bundle, Person, default_templates, generate, read_bundles, read_topics
from steadyrank.serve.tools.probes.levenshtein import distance

TEMPLATES = default_templates()
BUNDLE = Bundle("fr-1", "fr", Person("Hélène", "Dupont"), (Person("Marc", "Lefèvre"), Person("Zoé", "Martin")),
                Person("Jean-Pierre", "Roux"), "les origines du jazz", "la physiologie du sommeil")


def test_generation_is_deterministic_per_seed_and_names_are_distinct():
    first, again, other = generate(5, "fr", seed=3), generate(5, "fr", seed=3), generate(5, "fr", seed=4)
    assert first == again
    assert first != other
    for b in first + generate(5, "en", seed=3):
        people = [b.author, *b.impostors, b.other]
        assert len({p.family for p in people}) == 4
        assert b.topic != b.wrong_topic


@pytest.mark.parametrize("ablation", ABLATIONS)
def test_every_ablation_is_deterministic_per_seed(ablation):
    assert ablate(BUNDLE, ablation, TEMPLATES, seed=1) == ablate(BUNDLE, ablation, TEMPLATES, seed=1)


def test_base_renders_the_templates():
    r = ablate(BUNDLE, "base", TEMPLATES)
    assert r.query == "Quel ouvrage de Hélène Dupont porte sur les origines du jazz ?"
    assert r.candidates[0] == "Titre : les origines du jazz. Auteur : Hélène Dupont."
    assert r.candidates[3] == "Titre : la physiologie du sommeil. Auteur : Hélène Dupont."


def test_identity_destroying_ablations():
    mask = ablate(BUNDLE, "mask", TEMPLATES)
    assert "Dupont" not in mask.query and all("[NOM]" in c for c in mask.candidates)
    gib = ablate(BUNDLE, "gibberish", TEMPLATES, seed=5)
    token = gibberish_token("Hélène Dupont", 5)
    assert token in gib.query and token in gib.candidates[0] and token in gib.candidates[3]
    assert token != gibberish_token("Hélène Dupont", 6)
    near = ablate(BUNDLE, "near_miss", TEMPLATES, seed=2)
    author = lambda text: text.split("Auteur : ")[1].rstrip(".")  # noqa: E731
    assert [distance("Hélène Dupont", author(near.candidates[i])) for i in (1, 2, 4)] == [1, 2, 3]
    assert author(near.candidates[0]) == "Hélène Dupont" and "Hélène Dupont" in near.query


def test_light_ablations():
    assert all("Auteur" not in c for c in ablate(BUNDLE, "remove_label", TEMPLATES).candidates)
    stripped = ablate(BUNDLE, "strip_diacritics", TEMPLATES)
    assert "Helene Dupont" in stripped.query and "Lefevre" in stripped.candidates[1]
    assert initials(Person("Jean-Pierre", "Roux")) == "J.-P. Roux"
    assert "H. Dupont" in ablate(BUNDLE, "initials", TEMPLATES).query
    inv = ablate(BUNDLE, "inversion", TEMPLATES)
    assert "Dupont, Hélène" in inv.candidates[0] and "Hélène Dupont" in inv.query
    assert ablate(BUNDLE, "case_punct", TEMPLATES).query == "quel ouvrage de hélène dupont porte sur les origines du jazz"
    assert ablate(BUNDLE, "position_shift", TEMPLATES).candidates[0].startswith("Auteur : Hélène Dupont.")
    stress = ablate(BUNDLE, "unicode_stress", TEMPLATES)
    assert unicodedata.is_normalized("NFC", stress.query)
    assert unicodedata.is_normalized("NFD", stress.candidates[0]) and f"{NNBSP}:" in stress.candidates[0]


def test_parse_ablations_puts_base_first_and_refuses_unknown():
    assert parse_ablations("mask,initials") == ("base", "mask", "initials")
    with pytest.raises(ValueError, match="unknown ablation"):
        parse_ablations("mask,bogus")


def test_bundle_file_and_topics_file_round_trip(tmp_path):
    import json

    path = tmp_path / "bundles.jsonl"
    path.write_text("\n".join(json.dumps(b.to_json()) for b in [BUNDLE]) + "\n", encoding="utf-8")
    assert read_bundles(path) == [BUNDLE]
    (tmp_path / "bad.jsonl").write_text('{"id": "x"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="bad.jsonl:1: not a probe bundle"):
        read_bundles(tmp_path / "bad.jsonl")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "1", "title": "A", "text": "x"}\n{"_id": "2", "title": "", "text": "y"}\n'
                      '{"_id": "3", "title": "B", "text": "z"}\n', encoding="utf-8")
    assert read_topics(tmp_path) == ["A", "B"]

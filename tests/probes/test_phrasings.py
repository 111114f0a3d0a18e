"""The independently written noise of the denoiser's development set: two halves that share nothing."""

from __future__ import annotations

import json
import random
from importlib import resources

import pytest

from steadyrank.serve.cli.commands.probe import recovery
from steadyrank.serve.tools.probes import phrasings
from steadyrank.serve.tools.probes.noise import noise_templates


def test_every_list_splits_into_two_disjoint_halves_that_make_it_up():
    dev, heldout = phrasings.fragments("dev"), phrasings.fragments("heldout")
    for key in phrasings.KEYS:
        assert dev[key] and heldout[key] and not set(dev[key]) & set(heldout[key])
        assert sorted(dev[key] + heldout[key]) == sorted(phrasings._fragments()[key])


def test_queries_split_by_a_fixed_hash_of_their_id():
    ids = [f"q{i}" for i in range(200)]
    halves = [phrasings.query_half(q) for q in ids]
    assert halves == [phrasings.query_half(q) for q in ids]  # stable
    assert 70 < halves.count("dev") < 130
    queries = {q: f"query {q}" for q in ids}
    dev, heldout = (phrasings.variants(queries, half, 0, (0, 4))[4] for half in phrasings.HALVES)
    assert not set(dev) & set(heldout) and len(dev) + len(heldout) == 200


def test_a_noisy_variant_keeps_the_query_and_uses_only_its_halfs_fragments():
    own, other = phrasings.fragments("heldout"), phrasings.fragments("dev")
    for seed in range(50):
        text = phrasings.noisy("causes of left ventricular hypertrophy", 4, "heldout", random.Random(seed))
        assert "causes of left ventricular hypertrophy" in text
        assert any(f in text for f in own["stories"]) or "stories" in own  # typos may touch a fragment
        assert not any(f in text for f in other["stories"] + other["preambles"] if len(f) > 12)
    with pytest.raises(ValueError, match="half"):
        phrasings.fragments("test")


def test_the_phrasings_share_no_phrase_with_the_measurement_templates():
    """Written apart from serve/tools/probes/data/noise_en.json: no fragment is one of the templates, and no
    fragment of more than two words holds or is held in a template (single greetings like "hello"
    are common to both)."""
    data = json.loads(resources.files("steadyrank.serve.tools.probes").joinpath("data/phrasings_en.json").read_text("utf-8"))
    mine = {f.lower().strip(" ,.!?") for key in phrasings.KEYS if key != "emoji" for f in data[key]}
    theirs = {t.lower().strip(" ,.!?") for key, items in noise_templates("en").items() if key != "emoji" for t in items}
    assert not mine & theirs
    assert not [(m, t) for m in mine for t in theirs if min(len(m.split()), len(t.split())) > 2 and (m in t or t in m)]


def test_recovery_is_the_share_of_the_loss_that_denoising_wins_back():
    def arm(ndcg: float) -> dict:
        return {m: {"mean": ndcg} for m in ("ndcg@10", "ra_nwg@10", "recall@100")}

    retrieval = {"clean": arm(0.8), "noise2": arm(0.8), "noise2+rules": arm(0.7), "noise4": arm(0.6),
                 "noise4+rules": arm(0.65)}
    out = recovery(retrieval, (0, 2, 4), "rules")
    assert out["2"]["ndcg@10"] is None  # level 2 cost nothing
    assert out["4"]["ndcg@10"] == pytest.approx(0.25)  # (0.65 - 0.6) / (0.8 - 0.6)

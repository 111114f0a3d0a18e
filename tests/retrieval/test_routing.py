"""Dynamic-K routing: signals on constructed lists, decisions on constructed signals, calibration,
and the two-pass reranking pipeline."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from steadyrank.retrieval.calibration import Observation, calibrate
from steadyrank.retrieval.pipeline import rerank_candidates, serve_order
from steadyrank.retrieval.routing import (
    REASON_CODES,
    RoutingSettings,
    RoutingSignals,
    decide,
    entropy_signal,
    load_settings,
    margin_signal,
    overlap_signal,
    save_settings,
    tie_signal,
)
from steadyrank.retrieval.store import IndexStore, build_index
from tests.retrieval.helpers import HashEmbedder, synthetic_documents

QUIET = RoutingSignals(n_candidates=100, dense_margin=0.3, rerank_entropy=0.5, tie_at_top_n=False, overlap=0.8)


def test_signal_functions_follow_their_formulas():
    assert margin_signal(np.array([0.9, 0.8, 0.7]), 3) == pytest.approx(0.2)
    assert margin_signal(np.array([0.9]), 3) is None
    assert entropy_signal(np.zeros(8), 0.1) == pytest.approx(1.0)  # uniform
    assert entropy_signal(np.array([100.0, 0, 0, 0]), 0.1) == pytest.approx(0.0, abs=1e-12)  # one winner
    p = np.exp(np.array([1.0, 0.0]) / 0.5)
    p /= p.sum()
    assert entropy_signal(np.array([1.0, 0.0]), 0.5) == pytest.approx(-(p * np.log(p)).sum() / math.log(2))
    assert entropy_signal(np.array([1.0]), 0.1) is None
    assert tie_signal(np.array([0.9, 0.5, 0.5, 0.1]), 2) is True
    assert tie_signal(np.array([0.9, 0.5, 0.5, 0.1]), 3) is False
    assert tie_signal(np.array([0.9, 0.5]), 2) is None
    assert overlap_signal(["a", "b", "c"], ["c", "x", "a"], 2) == 0.0
    assert overlap_signal(["a", "b", "c"], ["b", "a", "x"], 2) == 1.0
    assert overlap_signal([], ["a"], 10) is None


def test_quiet_query_stays_at_k_low():
    decision = decide(QUIET, RoutingSettings())
    assert (decision.k_rerank, decision.escalated, decision.reasons) == (50, False, ())


@pytest.mark.parametrize(
    ("change", "reason", "code"),
    [
        ({"dense_margin": 0.01}, "dense_margin", "dense_margin"),
        ({"rerank_entropy": 0.999}, "rerank_entropy", "rerank_entropy"),
        ({"tie_at_top_n": True}, "tie group straddles top_n=10", "tie_at_top_n"),
        ({"overlap": 0.1}, "overlap@10", "overlap"),
    ],
)
def test_each_signal_escalates_with_its_reason(change, reason, code):
    signals = RoutingSignals(**{**QUIET.to_json(), **change})
    decision = decide(signals, RoutingSettings())
    assert decision.k_rerank == 100 and decision.escalated
    assert len(decision.reasons) == 1 and reason in decision.reasons[0]
    assert decision.codes == (code,)


def test_disabled_or_missing_signals_never_fire_and_reasons_accumulate():
    loud = RoutingSignals(n_candidates=100, dense_margin=0.0, rerank_entropy=1.0, tie_at_top_n=True, overlap=0.0)
    off = RoutingSettings(margin_below=None, entropy_above=None, tie_enabled=False, overlap_below=None)
    assert decide(loud, off).k_rerank == 50
    assert len(decide(loud, RoutingSettings()).reasons) == 4
    assert decide(loud, RoutingSettings()).codes == REASON_CODES[:4]
    assert decide(RoutingSignals(n_candidates=100), RoutingSettings()).k_rerank == 50  # nothing measured


def test_short_candidate_lists_and_fixed_routes():
    assert decide(RoutingSignals(n_candidates=30, dense_margin=0.0), RoutingSettings()).k_rerank == 30
    few = RoutingSignals(n_candidates=70, dense_margin=0.0)
    assert decide(few, RoutingSettings()).k_rerank == 70
    assert decide(QUIET, RoutingSettings(), "fixed100").k_rerank == 100
    assert decide(RoutingSignals(n_candidates=100, dense_margin=0.0), RoutingSettings(), "fixed50").k_rerank == 50
    with pytest.raises(ValueError, match="route"):
        decide(QUIET, RoutingSettings(), "sometimes")  # type: ignore[arg-type]


def test_settings_file_round_trip_and_typos_refused(tmp_path):
    settings = RoutingSettings(k_low=40, margin_below=None, entropy_above=0.97)
    save_settings(tmp_path / "s.json", settings, {"objective": "rate"})
    assert load_settings(tmp_path / "s.json") == settings
    (tmp_path / "bad.json").write_text('{"routing": {"margin_bellow": 0.1}}')
    with pytest.raises(ValueError, match="margin_bellow"):
        load_settings(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="k_low"):
        RoutingSettings(k_low=200, k_high=100)


def observations(rng: np.random.Generator, n: int = 60) -> list[Observation]:
    """Gains only where the dense margin is small; entropy and overlap are noise."""
    out = []
    for i in range(n):
        margin = float(rng.uniform(0, 0.2))
        gain = 0.3 if margin < 0.05 else 0.0
        signals = RoutingSignals(100, margin, float(rng.uniform(0.9, 1.0)), bool(i % 7 == 0), float(rng.uniform(0, 1)))
        out.append(Observation(f"q{i}", signals, gain, 50))
    return out


def test_calibration_finds_the_informative_signal():
    obs = observations(np.random.default_rng(0))
    result = calibrate(obs, RoutingSettings(), objective="efficiency", min_recovery=1.0)
    s = result.settings
    assert s.entropy_above is None and s.overlap_below is None and not s.tie_enabled
    small = [o.signals.dense_margin for o in obs if o.gain > 0]
    large = [o.signals.dense_margin for o in obs if o.gain == 0]
    assert max(small) < s.margin_below < min(large)
    assert result.recovered == 1.0 and result.escalation_rate == len(small) / len(obs)
    assert result.mean_reranked == pytest.approx(50 + 50 * result.escalation_rate)
    assert result.gain_per_extra_candidate == pytest.approx(0.3 / 50)


def test_calibration_to_a_target_rate():
    obs = observations(np.random.default_rng(1))
    result = calibrate(obs, RoutingSettings(), objective="rate", target_rate=0.1)
    assert result.escalation_rate <= 0.1
    assert result.mean_gain == pytest.approx(0.3 * result.escalation_rate)  # only gaining queries escalated


def test_calibration_disables_escalation_when_it_never_pays():
    obs = [Observation(f"q{i}", RoutingSignals(100, 0.01 * i, 0.95, False, 0.5), -0.1, 50) for i in range(10)]
    result = calibrate(obs, RoutingSettings(), objective="efficiency")
    assert result.escalation_rate == 0 and result.recovered is None


@dataclass(frozen=True)
class Scored:
    scores: np.ndarray
    keys: np.ndarray


class DotReranker:
    """A pointwise reranker: FP32 dot product of HashEmbedder vectors (counts its calls); the score
    is a saturating squash of the key, so equal scores can hide distinct keys."""

    rescores_boundary_ties = False

    def __init__(self) -> None:
        self.embedder = HashEmbedder(model_id="test/reranker")
        self.calls: list[int] = []

    def score(self, pairs):
        self.calls.append(len(pairs))
        query = pairs[0][0]
        keys = (self.embedder.encode([d for _, d in pairs]) @ self.embedder.encode([query])[0]).astype(np.float32)
        return Scored(np.round(keys, 1).astype(np.float32), keys)

    def fp32_keys(self, pairs):
        raise AssertionError("not called: rescores_boundary_ties is False")


def test_serve_order_puts_reranked_first_then_retrieval_order():
    ids, scores = serve_order(["a", "b", "c", "d"], np.array([0.1, 0.7], dtype=np.float32))
    assert ids == ["b", "a", "c", "d"]
    assert scores.tolist() == pytest.approx([0.7, 0.1, 0.1 - 1, 0.1 - 2])


def test_two_pass_reranking_follows_the_route(tmp_path):
    docs = synthetic_documents(300)
    build_index(tmp_path / "idx", docs, HashEmbedder())
    with IndexStore.open(tmp_path / "idx", HashEmbedder()) as store:
        candidates = store.search("glacier storms", mode="hybrid", depth=100)
        always = RoutingSettings(margin_below=1.0)  # cos@1 − cos@10 < 1 always: escalate
        never = RoutingSettings(margin_below=None, entropy_above=None, tie_enabled=False, overlap_below=None)
        reranker = DotReranker()
        high = rerank_candidates(store, "glacier storms", candidates, reranker, always)
        low = rerank_candidates(store, "glacier storms", candidates, reranker, never)
        assert reranker.calls == [50, 50, 50]
        assert high.decision.k_rerank == 100 and "dense_margin" in high.decision.reasons[0]
        assert set(high.timings) == set(low.timings) == {"rerank", "route"}
        assert high.first_pass_s < high.timings["rerank"] and low.first_pass_s <= low.timings["rerank"]
        np.testing.assert_array_equal(high.rerank_scores[:50], low.rerank_scores)  # pass 1 shared
        assert sorted(high.doc_ids) == sorted(candidates.doc_ids) and low.doc_ids[50:] == candidates.doc_ids[50:]
        assert list(high.scores) == sorted(high.scores, reverse=True)
        # served by rank key, not by the (rounded, tied) score
        np.testing.assert_array_equal(high.scores[:100], np.sort(high.rerank_keys.astype(np.float64))[::-1])
        assert len(np.unique(high.rerank_scores)) < len(np.unique(high.rerank_keys))


def test_new_signal_functions_follow_their_formulas():
    from steadyrank.retrieval.routing import boundary_gap_signal, first_stage_gap_signal, tail_mass_signal

    scores = np.array([5.0, 1.0, 4.0, 0.0, 3.0, 2.0])
    # head (top 2) = mean(5, 4) = 4.5; last 2 retrieval positions max = 3; std of all six
    assert boundary_gap_signal(scores, 2, 2) == pytest.approx((4.5 - 3.0) / scores.std())
    assert boundary_gap_signal(scores, 4, 3) is None  # fewer than top_n + at scores
    assert boundary_gap_signal(np.ones(6), 2, 2) is None
    p = np.exp(scores / 0.5 - (scores / 0.5).max())
    p /= p.sum()
    assert tail_mass_signal(scores, 0.5) == pytest.approx(p[3:].sum())
    assert tail_mass_signal(np.array([1.0]), 0.5) is None
    assert first_stage_gap_signal(np.array([10.0, 8.0, 5.0]), 3) == pytest.approx(0.5)
    assert first_stage_gap_signal(np.array([10.0]), 3) is None
    assert first_stage_gap_signal(None, 3) is None


def test_new_signals_escalate_with_their_codes():
    signals = RoutingSignals(n_candidates=100, boundary_gap=0.2, tail_mass=0.4, first_stage_gap=0.1)
    off = RoutingSettings(margin_below=None, entropy_above=None, tie_enabled=False, overlap_below=None)
    assert decide(signals, off).codes == ()
    on = RoutingSettings(margin_below=None, entropy_above=None, tie_enabled=False, overlap_below=None,
                         boundary_below=0.5, tail_mass_above=0.3, first_stage_gap_below=0.2)
    decision = decide(signals, on)
    assert decision.k_rerank == 100
    assert decision.codes == ("boundary_gap", "tail_mass", "first_stage_gap")
    assert set(decision.codes) <= set(REASON_CODES)


def _observations(n: int, seed: int) -> list[Observation]:
    """Queries whose gain is driven by boundary_gap (small gap → escalating gains), others noise."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        gap = float(rng.uniform(0, 2))
        gain = max(0.0, 1.0 - gap) * float(rng.uniform(0.5, 1.5))
        out.append(Observation(f"q{i}", RoutingSignals(n_candidates=100, boundary_gap=gap,
                                                       tail_mass=float(rng.random()), first_stage_gap=None), gain, 50))
    return out


def test_routing_model_learns_the_informative_signal_and_round_trips(tmp_path):
    from steadyrank.retrieval.calibration import fit_model

    observations = _observations(200, 0)
    result = fit_model(observations, RoutingSettings(), objective="rate", target_rate=0.5)
    s = result.settings
    assert s.model_features == ("boundary_gap", "tail_mass")  # first_stage_gap never observed
    assert s.model_coef[0] < 0 and abs(s.model_coef[0]) > 3 * abs(s.model_coef[1])
    assert result.escalation_rate <= 0.5 and result.recovered > 0.9
    assert (s.margin_below, s.entropy_above, s.tie_enabled, s.overlap_below) == (None, None, False, None)
    save_settings(tmp_path / "r.json", s)
    again = load_settings(tmp_path / "r.json")
    assert again == s
    held_out = _observations(200, 1)
    escalated = [decide(o.signals, again).escalated for o in held_out]
    gained = sum(o.gain for o, e in zip(held_out, escalated, strict=False) if e) / sum(o.gain for o in held_out)
    assert gained > 0.85  # generalises to queries it was not fitted on


def test_routing_model_on_one_feature_is_a_threshold_on_it():
    from steadyrank.retrieval.calibration import fit_model

    observations = _observations(200, 0)
    result = fit_model(observations, RoutingSettings(), objective="rate", target_rate=0.5, features=("boundary_gap",))
    s = result.settings
    assert s.model_features == ("boundary_gap",) and s.model_coef[0] < 0  # small gap → escalate
    escalated = [decide(o.signals, s).escalated for o in observations]
    gaps = [o.signals.boundary_gap for o in observations]
    # one feature: the escalated queries are exactly those below a cut on boundary_gap
    assert max(g for g, e in zip(gaps, escalated, strict=True) if e) < min(g for g, e in zip(gaps, escalated, strict=True) if not e)
    assert result.escalation_rate <= 0.5 and result.recovered > 0.9
    with pytest.raises(ValueError, match="model features"):
        fit_model(observations, RoutingSettings(), features=("nonsense",))


def test_routing_model_never_escalates_when_nothing_gains():
    from steadyrank.retrieval.calibration import fit_model

    flat = [Observation(o.qid, o.signals, 0.0, o.extra) for o in _observations(30, 2)]
    result = fit_model(flat, RoutingSettings())
    assert result.settings.model_above is None and result.escalation_rate == 0


def test_recovery_curve_and_oracle():
    from steadyrank.retrieval.calibration import best_recovery_within, recovery_curve

    signals = RoutingSignals(n_candidates=100)
    obs = [Observation("a", signals, 0.3, 50), Observation("b", signals, -0.1, 50),
           Observation("c", signals, 0.0, 50), Observation("d", signals, 0.0, 50)]
    oracle = recovery_curve(obs, [o.gain for o in obs], k_low=50)
    assert oracle[0] == {"escalated": 0.0, "mean_reranked": 50.0, "candidate_share": 0.5, "recovered": 0.0}
    assert oracle[1]["recovered"] == pytest.approx(1.5)  # escalating only "a" beats escalating all (0.2)
    assert oracle[1]["candidate_share"] == pytest.approx(62.5 / 100)
    assert oracle[-1]["recovered"] == pytest.approx(1.0) and oracle[-1]["candidate_share"] == pytest.approx(1.0)
    assert best_recovery_within(oracle, 0.65) == pytest.approx(1.5)
    worst = recovery_curve(obs, [-o.gain for o in obs], k_low=50)
    assert best_recovery_within(worst, 0.65) == pytest.approx(0.0)

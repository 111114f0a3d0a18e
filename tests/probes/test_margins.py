"""Δ-margins, ties and ΔΔ% summaries."""

from __future__ import annotations

import numpy as np
import pytest

from steadyrank.serve.tools.probes.margins import Margins, ProbeRow, margins, summarize


def test_margins_follow_the_definitions():
    m = margins([0.9, 0.5, 0.7, 0.4, 0.1])
    assert m == pytest.approx(Margins(0.9 - 0.7, 0.9 - 0.4, 0.9 - 0.1))


def test_equal_float32_values_are_a_tie_of_exactly_zero():
    s = np.float32(0.1) + np.float32(0.2)
    assert margins([s, s, 0.0, s, 0.0]).name == 0.0
    assert margins([s, s, 0.0, s, 0.0]).topic == 0.0


@pytest.mark.parametrize("bad", [[1, 2, 3], [0.1, 0.2, float("nan"), 0.3, 0.4]])
def test_margins_refuse_bad_input(bad):
    with pytest.raises(ValueError):
        margins(bad)


def row(bundle: str, ablation: str, name: float, topic: float = 0.3) -> ProbeRow:
    return ProbeRow(bundle, "en", ablation, (0.0,) * 5, Margins(name, topic, 0.5))


def test_summary_delta_delta_excludes_small_bases_and_counts_ties():
    rows = [row("a", "base", 0.10), row("b", "base", 0.20), row("c", "base", 0.01),
            row("a", "mask", 0.0), row("b", "mask", 0.10), row("c", "mask", 0.02)]
    by = {r["ablation"]: r for r in summarize(rows)}
    mask = by["mask"]
    assert mask["ties"] == {"name": 1, "topic": 0, "both": 0}
    assert mask["excluded"] == 1
    assert mask["delta_delta_pct"]["mean"] == pytest.approx((-100.0 + -50.0) / 2)
    assert mask["delta_delta_pct"]["n"] == 2
    assert mask["delta_name_abs"]["mean"] == pytest.approx((-0.10 - 0.10 + 0.01) / 3)
    assert by["base"]["delta_delta_pct"]["mean"] == 0.0
    assert mask["delta_name"]["low"] <= mask["delta_name"]["mean"] <= mask["delta_name"]["high"]

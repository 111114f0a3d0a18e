"""The metric registry is the single description of every metric: the engine, the measure parser
and docs/ARCHITECTURE.md all read it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from steadyrank.metrics import METRIC_KEYS, METRICS, evaluate, parse_measure
from steadyrank.metrics.registry import markdown_table, metric_definition

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "ARCHITECTURE.md"


def test_architecture_document_holds_the_registry_table():
    assert markdown_table() in ARCHITECTURE.read_text(encoding="utf-8")


def test_measure_parsing_and_keys_come_from_the_registry():
    assert dict(METRIC_KEYS) == {name: d.item.key for name, d in METRICS.items()}
    for name, definition in METRICS.items():
        assert definition.name == name and parse_measure(f"{name}@3").key == definition.item.key
    with pytest.raises(ValueError, match="known metrics: " + ", ".join(sorted(METRICS))):
        parse_measure("nope@3")
    with pytest.raises(KeyError, match="unknown metric 'nope'"):
        metric_definition("nope")


def test_lower_is_better_flips_proc_only_for_harm():
    """PROC takes the smallest achievable Harm (harmful items last) and the largest precision4."""
    run = {"q": {"bad": 0.9, "good": 0.5, "meh": 0.1}}
    qrels = {"q": {"bad": 1, "good": 5, "meh": 3}}
    result = evaluate(run, qrels, ["harm@1", "precision4@1"])
    assert [name for name, d in METRICS.items() if d.lower_is_better] == ["harm"]
    assert result["harm@1"].expected[0] == 1.0 and result["harm@1"].proc[0] == 0.0
    assert result["precision4@1"].expected[0] == 0.0 and result["precision4@1"].proc[0] == 1.0
    assert np.isnan(evaluate(run, {"q": {"bad": 1}}, ["nrecall5@1"])["nrecall5@1"].expected[0])

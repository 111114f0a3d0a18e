"""Measure names: parsing ``NAME@K`` strings.

A measure is a metric name and a cutoff k ≥ 1, written ``ndcg@10``. The metrics themselves (formula,
item value, NA rule) are defined once in :mod:`steadyrank.metrics.registry`; docs/ARCHITECTURE.md
"Metric definitions" lists them. "Relevant" is ``grade >= rel_level``; N+ counts relevant judged
documents in the qrels. The set metrics (ra_nwg, nrecall4, nrecall5, precision4, harm) read grades
on the 1–5 rubric.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from steadyrank.metrics.registry import METRICS

#: Which per-item value each metric ranks by ("key"): extremes sort each tie group by it.
METRIC_KEYS: Mapping[str, str] = MappingProxyType({name: d.item.key for name, d in METRICS.items()})

_MEASURE_RE = re.compile(r"^\s*([a-z_0-9]+)\s*@\s*(-?\d+)\s*$")


@dataclass(frozen=True, order=True)
class Measure:
    """A metric at a cutoff, e.g. ``Measure("ndcg", 10)`` printed as ``ndcg@10``."""

    name: str
    k: int

    def __str__(self) -> str:
        return f"{self.name}@{self.k}"

    @property
    def key(self) -> str:
        """The per-item value this metric ranks by (see METRIC_KEYS)."""
        return METRICS[self.name].item.key


def parse_measure(text: str | Measure) -> Measure:
    """Parse ``"NAME@K"`` (case-insensitive); raise ValueError naming the problem."""
    if isinstance(text, Measure):
        return text
    match = _MEASURE_RE.match(str(text).lower())
    if not match:
        raise ValueError(f"cannot parse measure {text!r}: expected NAME@K, e.g. ndcg@10")
    name, k = match.group(1), int(match.group(2))
    if name not in METRICS:
        known = ", ".join(sorted(METRICS))
        raise ValueError(f"unknown metric {name!r} in {text!r}; known metrics: {known}")
    if k < 1:
        raise ValueError(f"cutoff must be >= 1 in {text!r}")
    return Measure(name, k)


def parse_measures(texts: Sequence[str | Measure]) -> list[Measure]:
    """Parse several measures, dropping duplicates while keeping the given order."""
    if not texts:
        raise ValueError("no measures given")
    return list(dict.fromkeys(parse_measure(t) for t in texts))

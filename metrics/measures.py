"""Measure names: parsing ``NAME@K`` strings and what each measure needs.

A measure is a metric name and a cutoff k ≥ 1, written ``ndcg@10``. The names (DESIGN.md
"Definitions" gives every formula):

============  =========================================================  ==========================
name          value at cutoff k                                          NA when
============  =========================================================  ==========================
hits          #relevant in top k                                          never
recall        hits / N+                                                   N+ = 0
precision     hits / k                                                    never
f1            2·hits / (k + N+)                                           never
ndcg          DCG@k / IDCG@k, gain = grade (trec_eval ``ndcg_cut``)        N+ = 0
ndcg_exp      DCG@k / IDCG@k, gain = 2^grade − 1                          N+ = 0
mrr           1 / rank of the first relevant item in top k (RR@k)        N+ = 0
map           Σ_{relevant in top k} precision@rank / N+ (``map_cut``)     N+ = 0
err           Σ_r (1/r) R_r Π_{i<r}(1 − R_i),  R = (2^g − 1) / 2^gmax      N+ = 0
ra_nwg        Σ_{top k} w / (sum of the k largest w in the judged pool)   that denominator = 0
nrecall4      #(rubric ≥ 4 in top k) / min(k, n4 + n5)                    n4 + n5 = 0
nrecall5      #(rubric = 5 in top k) / min(k, n5)                         n5 = 0
precision4    #(rubric ≥ 4 in top k) / k                                  never
harm          #(rubric ≤ 2 in top k) / k                                  never
============  =========================================================  ==========================

"Relevant" is ``grade >= rel_level``; N+ counts relevant judged documents in the qrels. The set
metrics (ra_nwg, nrecall4, nrecall5, precision4, harm) read grades on the 1–5 rubric.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Which per-item value each metric ranks by ("key"): extremes sort each tie group by it.
METRIC_KEYS: dict[str, str] = {
    "hits": "relevant",
    "recall": "relevant",
    "precision": "relevant",
    "f1": "relevant",
    "mrr": "relevant",
    "map": "relevant",
    "ndcg": "gain_linear",
    "ndcg_exp": "gain_exponential",
    "err": "err_probability",
    "ra_nwg": "rarity_weight",
    "nrecall4": "rubric_4plus",
    "nrecall5": "rubric_5",
    "precision4": "rubric_4plus",
    "harm": "rubric_harmful",
}

#: Metrics where a larger value is worse (PROC takes the smallest achievable value for these).
LOWER_IS_BETTER = frozenset({"harm"})

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
        return METRIC_KEYS[self.name]


def parse_measure(text: str | Measure) -> Measure:
    """Parse ``"NAME@K"`` (case-insensitive); raise ValueError naming the problem."""
    if isinstance(text, Measure):
        return text
    match = _MEASURE_RE.match(str(text).lower())
    if not match:
        raise ValueError(f"cannot parse measure {text!r}: expected NAME@K, e.g. ndcg@10")
    name, k = match.group(1), int(match.group(2))
    if name not in METRIC_KEYS:
        known = ", ".join(sorted(METRIC_KEYS))
        raise ValueError(f"unknown metric {name!r} in {text!r}; known metrics: {known}")
    if k < 1:
        raise ValueError(f"cutoff must be >= 1 in {text!r}")
    return Measure(name, k)


def parse_measures(texts: "list[str | Measure] | tuple[str | Measure, ...]") -> list[Measure]:
    """Parse several measures, dropping duplicates while keeping the given order."""
    if not texts:
        raise ValueError("no measures given")
    return list(dict.fromkeys(parse_measure(t) for t in texts))

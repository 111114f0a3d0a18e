"""Swap rates: how often a metric's verdict between two runs flips on another sample of queries.

The swap method of Voorhees and Buckley (SIGIR 2002), as ordinal-ranking studies use it to compare
metrics such as ERR and nDCG (OrdRankBen, Wang et al.): for each pair of runs and each of T random
splits of the queries (defined for both runs) into two disjoint halves X and Y of ⌊n/2⌋ queries,
``d_X = mean_X(a) − mean_X(b)`` and ``d_Y`` likewise; the split is a *swap* when d_Y has the
opposite sign of d_X (d_X = 0 splits are left out). Splits are binned by |d_X|, the performance
difference the verdict was reached at, in bins 0.01 wide from 0 to 0.20 and one bin above
(:data:`SWAP_BINS`), and each bin reports its splits, swaps and swap rate. A metric whose rates
fall faster as the difference grows tells two runs apart on fewer queries.

The spread of a metric across cutoffs (:func:`cutoff_spread`) is the population standard deviation
of its mean expected value over the cutoffs evaluated (OrdRankBen reports each metric at
5, 10, 15, 20, 30 and 60).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Lower edges of the |d_X| bins: [0, 0.01), [0.01, 0.02), …, [0.19, 0.20), [0.20, ∞).
SWAP_BINS = tuple(round(0.01 * i, 2) for i in range(21))
#: The cutoffs OrdRankBen reports every metric at.
ORDRANKBEN_CUTOFFS = (5, 10, 15, 20, 30, 60)
#: Query indices held at once while drawing random splits.
_PERMUTATION_ITEMS = 1 << 22


@dataclass(frozen=True)
class SwapBin:
    low: float
    high: float | None
    splits: int
    swaps: int

    @property
    def rate(self) -> float | None:
        return self.swaps / self.splits if self.splits else None

    def as_dict(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "splits": self.splits, "swaps": self.swaps, "rate": self.rate}


@dataclass(frozen=True)
class SwapRate:
    """One metric's swap rates over every pair of runs."""

    measure: str
    pairs: int
    splits: int
    swaps: int
    bins: tuple[SwapBin, ...]

    @property
    def rate(self) -> float | None:
        return self.swaps / self.splits if self.splits else None

    def as_dict(self) -> dict[str, Any]:
        return {"measure": self.measure, "pairs": self.pairs, "splits": self.splits, "swaps": self.swaps,
                "rate": self.rate, "bins": [b.as_dict() for b in self.bins if b.splits]}


def _split_differences(a: np.ndarray, b: np.ndarray, trials: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(d_X, d_Y) of ``trials`` random splits of the queries defined in both into disjoint halves."""
    both = ~np.isnan(a) & ~np.isnan(b)
    diff = (a - b)[both]
    half = diff.size // 2
    if half == 0:
        return np.zeros(0), np.zeros(0)
    d_x, d_y = np.empty(trials), np.empty(trials)
    step = max(1, _PERMUTATION_ITEMS // diff.size)  # permutations drawn at once: memory stays bounded
    for begin in range(0, trials, step):
        count = min(step, trials - begin)
        shuffled = diff[rng.permuted(np.broadcast_to(np.arange(diff.size), (count, diff.size)), axis=1)]
        d_x[begin : begin + count] = shuffled[:, :half].mean(axis=1)
        d_y[begin : begin + count] = shuffled[:, half : 2 * half].mean(axis=1)
    return d_x, d_y


def swap_rates(
    per_query: Mapping[str, Mapping[str, np.ndarray]], measures: Sequence[str], *, trials: int = 1000, seed: int = 0,
    bins: Sequence[float] = SWAP_BINS,
) -> list[SwapRate]:
    """Swap rates of each measure over every pair of runs: ``per_query[run][measure]`` is the
    per-query expected value (NaN = NA), the same queries in the same order for every run."""
    if len(per_query) < 2:
        raise ValueError("swap rates compare runs: give at least two")
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    edges = np.asarray(bins, dtype=np.float64)
    if edges.size == 0 or edges[0] != 0 or np.any(np.diff(edges) <= 0):
        raise ValueError("bins must start at 0 and increase")
    out: list[SwapRate] = []
    for measure in measures:
        rng = np.random.default_rng(seed)
        first: list[np.ndarray] = []
        second: list[np.ndarray] = []
        pairs = list(itertools.combinations(per_query, 2))
        for run_a, run_b in pairs:
            d_x, d_y = _split_differences(per_query[run_a][measure], per_query[run_b][measure], trials, rng)
            first.append(d_x)
            second.append(d_y)
        d_x, d_y = np.concatenate(first), np.concatenate(second)
        decided = d_x != 0
        d_x, d_y = d_x[decided], d_y[decided]
        swapped = np.sign(d_y) != np.sign(d_x)
        which = np.searchsorted(edges, np.abs(d_x), side="right") - 1
        highs: list[float | None] = [float(h) for h in edges[1:]] + [None]
        table = tuple(SwapBin(float(low), highs[i], int((which == i).sum()), int((swapped & (which == i)).sum()))
                      for i, low in enumerate(edges))
        out.append(SwapRate(measure, len(pairs), int(d_x.size), int(swapped.sum()), table))
    return out


def cutoff_spread(means: Mapping[str, float]) -> dict[str, dict[str, Any]]:
    """For each metric measured at two or more cutoffs (``means``: ``"ndcg@10"`` → mean), its cutoffs,
    means and their population standard deviation."""
    by_name: dict[str, list[tuple[int, float]]] = {}
    for measure, value in means.items():
        name, _, k = measure.partition("@")
        by_name.setdefault(name, []).append((int(k), value))
    spread: dict[str, dict[str, Any]] = {}
    for name, points in by_name.items():
        if len(points) < 2:
            continue
        points.sort()
        values = np.array([v for _, v in points], dtype=np.float64)
        spread[name] = {"cutoffs": [k for k, _ in points], "means": values.tolist(),
                        "std": float(np.nanstd(values)) if not np.all(np.isnan(values)) else None}
    return spread

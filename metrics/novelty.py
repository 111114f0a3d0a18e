"""Novelty-discounted RA-nWG: repeated evidence from one source or facet counts β of its weight.

On a ranked list, item d at rank r carries its RA-nWG weight w(d) times δ(d): 1 if no item ranked
before it with a positive weight has d's source (or facet), else β ∈ [0, 1). Items without a
positive weight carry no evidence, so they neither gain nor use up a source. The metric is
``Σ_{r ≤ k} w·δ / ideal_k``, ``ideal_k`` = the largest such sum any k judged items reach: the k
largest of v(d) = w(d) for the heaviest item of each source and β·w(d) for the others (taking a
source's heaviest item first can only raise both the first-occurrence term and the sum, and the
marginal gains w₁ ≥ βw₂ ≥ βw₃ … of a source are decreasing, so the greedy choice is optimal). With
β = 1 it is RA-nWG. Sources live in the item label ``source`` (−1: none, every item its own).

Over tie orders (docs/ARCHITECTURE.md "Metric definitions"), an item x at in-group offset t of its
group G (size m, c items before it) has the t items before it in G drawn uniformly from the other
m − 1, so with ``a_x`` the positive-weight items of x's source in G (x included) and ``fresh_x``
when no such item ranks in an earlier group:
``E[δ_x | offset t] = β + (1 − β)·fresh_x·C(m − a_x, t) / C(m − 1, t)``, and the expected weight at
that position is ``(1/m) Σ_{x ∈ G} w_x·E[δ_x | offset t]``.

The best order sorts each group by v (fresh heaviest item of each source: w; others: β·w), which
is the greedy optimum at every cutoff. The worst order is not one order: at each cutoff it is the
groups before the cutoff's group each arranged lightest-first, plus the cheapest t-subset of that
group, found by dynamic programming over its sources (cost of n items of source s:
``δ_s·w₍₁₎ + β·(w₍₂₎ + … + w₍ₙ₎)`` with its n lightest, ``δ_s`` = 1 if fresh else β; items without
weight cost nothing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from steadyrank.metrics.combinatorics import binomial_ratio, log_factorials
from steadyrank.metrics.layout import Layout
from steadyrank.metrics.values import Items, ItemValue, column_indices, gather, running_sum

if TYPE_CHECKING:
    from steadyrank.metrics.engine import ItemContext

SOURCE_LABEL = "source"
SOURCE = ItemValue(lambda items: items.extra(SOURCE_LABEL))


def _scatter(order: np.ndarray, sorted_values: np.ndarray) -> np.ndarray:
    """Values given in ``order`` (Q, N) back in the original positions."""
    out = np.empty_like(sorted_values)
    np.put_along_axis(out, order, sorted_values, axis=1)
    return out


def _run_starts(*keys: np.ndarray) -> np.ndarray:
    """Where a run of equal key tuples starts, along each row of keys sorted by them: (Q, N) bool."""
    new = np.zeros(keys[0].shape, dtype=bool)
    new[:, :1] = True
    for key in keys:
        new[:, 1:] |= key[:, 1:] != key[:, :-1]
    return new


def _first_per_source(weights: np.ndarray, sources: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Per row, the positive-weight item of each source that is first by ``key`` (ties: column): (Q, N) bool."""
    positive = weights > 0
    cols = column_indices(weights)
    order = np.lexsort((cols, key, sources, ~positive), axis=1)
    first = _run_starts(gather(sources, order), gather(~positive, order)) & gather(positive, order)
    return _scatter(order, first)


def novelty_values(weights: np.ndarray, sources: np.ndarray, beta: float) -> np.ndarray:
    """v per item of each row: w for the heaviest positive item of each source, β·w for the others."""
    return np.where(_first_per_source(weights, sources, -weights), weights, beta * weights)


def _fixed_contributions(weights: np.ndarray, sources: np.ndarray, beta: float) -> np.ndarray:
    """w·δ along each row taken as a ranked list: (Q, n)."""
    positions = column_indices(weights)
    return np.where(_first_per_source(weights, sources, positions), weights, beta * weights)


def _group_source_facts(layout: Layout, weights: np.ndarray, sources: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each ranked position of the tied layout: ``fresh`` (no positive item of its source in an
    earlier group) and ``a`` (positive items of its source in its group), both meaningful where w > 0."""
    positive = weights > 0
    starts = layout.group_start
    positions = column_indices(weights)
    order = np.lexsort((positions, starts, sources, ~positive), axis=1)
    s_source, s_start, s_positive = gather(sources, order), gather(starts, order), gather(positive, order)
    columns = column_indices(weights)
    source_run = np.maximum.accumulate(np.where(_run_starts(s_source, ~s_positive), columns, 0), axis=1)
    fresh_sorted = gather(s_start, source_run) == s_start
    group_new = _run_starts(s_source, ~s_positive, s_start)
    run_start = np.maximum.accumulate(np.where(group_new, columns, 0), axis=1)
    group_end = np.ones(group_new.shape, dtype=bool)
    group_end[:, :-1] = group_new[:, 1:]
    width: int = weights.shape[1]
    run_end = np.minimum.accumulate(np.where(group_end, columns + 1, width)[:, ::-1], axis=1)[:, ::-1]
    return _scatter(order, fresh_sorted), _scatter(order, run_end - run_start)


def novelty_gain(layout: Layout, weight: ItemValue, beta: float) -> np.ndarray:
    """E[Σ_{r ≤ k} w·δ] for every k on ``layout``: (Q, K) (see the module docstring)."""
    kmax = layout.kmax
    weights, sources = layout.values(weight), layout.values(SOURCE)
    if layout.singleton:
        return running_sum(_fixed_contributions(weights, sources, beta)[:, :kmax])
    fresh, count = _group_source_facts(layout, weights, sources)
    m = layout.size
    t = np.arange(kmax)[None, :] - layout.start
    log_fact = log_factorials(int(m.max(initial=1)))
    term = np.zeros(m.shape)
    fresh_positive = fresh & (weights > 0)
    for a in np.unique(count[fresh_positive]):
        in_class = layout.group_totals(np.where(fresh_positive & (count == a), weights, 0.0))
        term += in_class * binomial_ratio(log_fact, m - a, t, m - 1, t)
    return running_sum(beta * layout.group_totals(weights) / m + (1 - beta) * term / m)


def novelty_ideal(items: ItemContext, kmax: int) -> np.ndarray:
    """The largest Σ w·δ of any k judged items, k = 1..K: (Q, K) (the k largest v of the pool)."""

    def compute() -> np.ndarray:
        from steadyrank.metrics.registry import rarity_transform

        rubric = np.nan_to_num(items.judged_rubric, nan=0.0)
        w = rarity_transform(items)(Items(rubric, rubric, ~np.isnan(items.judged_rubric)))
        v = -np.sort(-novelty_values(w, items.judged_labels[SOURCE_LABEL], items.params.novelty_beta), axis=1)
        n_rows: int = rubric.shape[0]
        width: int = rubric.shape[1]
        best = np.zeros((n_rows, kmax))
        best[:, : min(kmax, width)] = v[:, :kmax]
        return running_sum(best)

    return items.cached(("novelty_ideal", kmax), compute)


def _best_order(layout: Layout, weights: np.ndarray, sources: np.ndarray, beta: float) -> np.ndarray:
    """Each group sorted by v: w for the heaviest fresh item of each source, β·w otherwise: (Q, N) columns."""
    fresh, _ = _group_source_facts(layout, weights, sources)
    starts = layout.group_start
    positions = column_indices(weights)
    order = np.lexsort((positions, -weights, starts, sources, ~(weights > 0)), axis=1)
    first = _run_starts(gather(sources, order), gather(~(weights > 0), order), gather(starts, order))
    heaviest = _scatter(order, first & gather(weights > 0, order))
    v = np.where(heaviest & fresh, weights, beta * weights)
    order = np.lexsort((positions, -v, starts), axis=1)
    return order if layout.ranked is None else gather(layout.ranked, order)


def _cheapest(weights: np.ndarray, sources: np.ndarray, fresh: np.ndarray, beta: float, n_items: int) -> float:
    """The smallest Σ w·δ of ``n_items`` items of one group (zero-weight items free): dynamic programming."""
    positive = weights > 0
    free = int((~positive).sum())
    need = n_items - free
    if need <= 0:
        return 0.0
    best = np.full(need + 1, np.inf)
    best[0] = 0.0
    for source in np.unique(sources[positive]):
        mine = positive & (sources == source)
        w = np.sort(weights[mine])
        first = 1.0 if bool(fresh[mine][0]) else beta
        costs = np.concatenate([[0.0], first * w[0] + beta * np.concatenate([[0.0], np.cumsum(w[1:])])])
        step = np.full(need + 1, np.inf)
        for n, cost in enumerate(costs):
            if n > need:
                break
            step[n:] = np.minimum(step[n:], best[: need + 1 - n] + cost)
        best = step
    return float(best[need])


def _worst(layout: Layout, weights: np.ndarray, sources: np.ndarray, beta: float) -> np.ndarray:
    """min over tie orders of Σ_{r ≤ k} w·δ for every k: (Q, K) (see the module docstring)."""
    kmax = layout.kmax
    fresh, count = _group_source_facts(layout, weights, sources)
    starts = layout.group_start
    positions = column_indices(weights)
    lightest = np.lexsort((positions, weights, starts), axis=1)[:, :kmax]
    along = _fixed_contributions(gather(weights, lightest), gather(sources, lightest), beta)
    complete = np.zeros((weights.shape[0], kmax + 1))
    complete[:, 1:] = running_sum(along)
    unit = np.where(fresh, weights, beta * weights)  # exact where each source has one item in the group
    cheapest_first = np.lexsort((positions, unit, starts), axis=1)[:, :kmax]
    partial = np.zeros((weights.shape[0], kmax + 1))
    partial[:, 1:] = running_sum(gather(unit, cheapest_first))
    c, e = layout.start, layout.end
    k = np.arange(1, kmax + 1)[None, :]
    out = np.where(k == e, gather(complete, np.minimum(e, kmax)),
                   gather(complete, c) + gather(partial, k) - gather(partial, c))
    # Cutoffs inside a group holding two positive items of one source: the cheapest subset by DP.
    repeated = layout.group_totals(((weights > 0) & (count > 1)).astype(np.float64)) > 0
    for q, p in np.argwhere(repeated & (k < e)):
        lo, hi = int(c[q, p]), int(e[q, p])
        cheapest = _cheapest(weights[q, lo:hi], sources[q, lo:hi], fresh[q, lo:hi], beta, int(p) + 1 - lo)
        out[q, p] = complete[q, lo] + cheapest
    return out


def novelty_extreme(items: ItemContext, layout: Layout, best: bool) -> np.ndarray:
    """max (``best``) or min over tie orders of novelty-discounted RA-nWG on the tied ``layout``: (Q, K)."""
    from steadyrank.metrics.registry import RARITY_WEIGHT

    beta = items.params.novelty_beta
    weight = items.item(RARITY_WEIGHT)
    weights, sources = layout.values(weight), layout.values(SOURCE)
    if best:
        fixed = Layout.fixed(layout.grid, _best_order(layout, weights, sources, beta), layout.kmax)
        gain = novelty_gain(fixed, weight, beta)
    else:
        gain = _worst(layout, weights, sources, beta)
    with np.errstate(divide="ignore", invalid="ignore"):
        return gain / novelty_ideal(items, layout.kmax)

"""Closed-form expectations of ranking metrics over all orders inside tie groups.

Every function takes a :class:`~metrics.layout.Layout` (the groups of the K ranked positions),
per-item values (:class:`~metrics.values.ItemValue`), and returns cumulative per-position arrays
``(Q, K)``: entry ``[q, k-1]`` is the metric's expectation at cutoff k. On a layout of singleton
groups (a fixed order) the same formulas reduce to the plain metric, so tie-aware and
tie-oblivious values come from one implementation. Positions are 1-based ranks ``r = p + 1``.

Notation per position p in group G (docs/ARCHITECTURE.md "Metric definitions"): ``c`` items ranked before G,
``m = |G|``, ``t = p - c`` the in-group offset, ``r`` relevant items in G, ``R_before`` relevant
items before G.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from steadyrank.metrics.combinatorics import binomial, binomial_ratio, log_factorials
from steadyrank.metrics.layout import Layout
from steadyrank.metrics.values import ItemValue, gather, running_sum


def log_discounts(kmax: int) -> np.ndarray:
    """DCG discount 1 / log2(r + 1) for ranks r = 1..K, shape (K,)."""
    return 1.0 / np.log2(np.arange(2, kmax + 2))


def expected_positional(layout: Layout, values: ItemValue, weights: np.ndarray | None = None) -> np.ndarray:
    """E[Σ_{r ≤ k} weight_r · value_at_r] for every k: (Q, K).

    Each position's expected value is the mean of its group, ``mean_{i∈G} value_i``, so
    ``E[Hits@k] = Σ_n t_n r_n / |G_n|`` and ``E[DCG@k] = Σ_n mean_G f(g) Σ_{r in G, r ≤ k} 1/log2(r+1)``.
    """
    means = layout.group_means(values)
    if weights is not None:
        means = means * weights[None, :]
    return running_sum(means)


def expected_reciprocal_rank(layout: Layout, relevant: ItemValue) -> np.ndarray:
    """E[RR@k] for every k: (Q, K). Only the first group holding a relevant item matters.

    ``E = Σ_{t=0}^{u} 1/(c+t+1) · [C(m−r,t)/C(m,t)] · r/(m−t)``, ``u = min(m−1, k−c−1)``; 0 if k ≤ c.
    The bracket is the chance that the t items ranked first in G are all non-relevant.
    """
    n_queries: int = layout.group_start.shape[0]
    kmax = layout.kmax
    if layout.singleton:  # RR of a fixed order: 1/r at the first relevant rank r, from there on
        hit = layout.values(relevant) > 0
        first = np.argmax(hit, axis=1)[:, None]  # the first relevant position (0 where there is none)
        reciprocal = np.where(np.any(hit, axis=1)[:, None], 1.0 / (first + 1), 0.0)
        return np.where(np.arange(kmax)[None, :] >= first, reciprocal, 0.0)
    group_relevant = layout.group_sums(relevant)
    has_relevant = group_relevant > 0
    found: npt.NDArray[np.bool_] = np.any(has_relevant, axis=1)
    first = np.argmax(has_relevant, axis=1)[:, None]
    c = gather(layout.start, first)
    m = gather(layout.size, first)
    r = gather(group_relevant, first)

    offsets = np.arange(kmax)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.maximum((m - r - offsets) / (m - offsets), 0.0)
        none_before = np.ones((n_queries, kmax))
        none_before[:, 1:] = np.cumprod(step[:, :-1], axis=1)
        first_here = np.where(offsets < m, none_before * r / (m - offsets), 0.0)
    cumulative = running_sum(first_here / (c + offsets + 1))

    cutoffs = offsets + 1
    last_offset = np.minimum(m - 1, cutoffs - c - 1).astype(np.int64)
    value = gather(cumulative, np.minimum(np.maximum(last_offset, 0), kmax - 1))
    return np.where(found[:, None] & (cutoffs > c), value, 0.0)


def expected_average_precision(layout: Layout, relevant: ItemValue, n_relevant: np.ndarray) -> np.ndarray:
    """E[AP@k] (divided by N+, as trec_eval ``map_cut``) for every k: (Q, K).

    Position ``c+t+1`` of group G is relevant with probability r/m, and then the expected number
    of relevant items up to it is ``R_before + 1 + t·(r−1)/(m−1)``, so
    ``E = (1/N+) Σ_n Σ_{t<t_n} (r/m) · (R_before + 1 + t·(r−1)/(m−1)) / (c+t+1)``.
    """
    kmax = layout.kmax
    positions = np.arange(kmax)[None, :]
    if layout.singleton:  # AP of a fixed order: precision at each relevant rank
        rel = layout.values(relevant)
        with np.errstate(divide="ignore", invalid="ignore"):
            return running_sum(rel * running_sum(rel) / (positions + 1)) / n_relevant[:, None]
    r = layout.group_sums(relevant)
    m = layout.size
    offset = positions - layout.start
    with np.errstate(divide="ignore", invalid="ignore"):
        others = np.where(m > 1, (r - 1) / (m - 1), 0.0)
    precision_term = (r / m) * (layout.sum_before_group(relevant) + 1 + offset * others) / (positions + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return running_sum(precision_term) / n_relevant[:, None]


def expected_err(layout: Layout, stop_probability: ItemValue, classes: list[tuple[float, ItemValue]]) -> np.ndarray:
    """E[ERR@k] (Chapelle's expected reciprocal rank) for every k: (Q, K).

    ``ERR = Σ_r (1/r) R_r Π_{i<r}(1 − R_i)``. Earlier groups contribute the fixed product
    ``P_before = Π_{i before G}(1 − R_i)``. Inside G (size m) the item at offset j is uniform and
    the j items before it are a uniform j-subset of the others, so
    ``E[R_j Π_before-in-G (1−R)] = (1/m) Σ_x R_x e_j({1−R_y : y≠x}) / C(m−1, j)``.

    ``classes`` lists each distinct positive R value with its item indicator; items with R = 0
    (factor 1 − R = 1) are counted as ``n0``. With class counts ``n_c`` in G,
    ``e_j = Σ_l a_l C(n0, j−l)`` where ``a_l`` are the coefficients of
    ``Π_c (1 + (1−R_c) z)^{n_c − [c = class of x]}`` (a short polynomial: the relevant items in G).
    """
    kmax = layout.kmax
    positions = np.arange(kmax)[None, :]
    if layout.singleton:  # ERR of a fixed order, term by term
        stop = layout.values(stop_probability)
        going = np.ones(stop.shape)
        going[:, 1:] = np.cumprod(1.0 - stop[:, :-1], axis=1)
        return running_sum(going * stop / (positions + 1))
    before = np.exp(layout.sum_before_group(stop_probability.map(lambda r: np.log1p(-r))))
    counts = [layout.group_sums(indicator) for _, indicator in classes]
    n_relevant_in_group = np.sum(counts, axis=0) if counts else np.zeros(layout.size.shape)
    active = n_relevant_in_group > 0
    contribution = np.zeros(layout.size.shape)
    if not active.any():
        return contribution
    m = layout.size[active].astype(np.int64)
    offset = (positions - layout.start)[active].astype(np.int64)
    class_counts = [c[active].astype(np.int64) for c in counts]
    n_zero = m - np.sum(class_counts, axis=0)
    degree = int(min(np.max(np.sum(class_counts, axis=0)) - 1, kmax - 1))
    log_fact = log_factorials(int(m.max()))
    subset_count = binomial(log_fact, m - 1, offset)
    degrees = np.arange(degree + 1)[:, None]

    within = np.zeros(m.shape)
    for x_index, (x_probability, _) in enumerate(classes):
        coefficients = np.zeros((degree + 1, m.size))
        coefficients[0] = 1.0
        for c_index, (c_probability, _) in enumerate(classes):
            n_c = class_counts[c_index] - (c_index == x_index)
            factor = binomial(log_fact, n_c[None, :], degrees) * (1.0 - c_probability) ** degrees
            coefficients = np.stack(
                [(coefficients[: d + 1] * factor[d::-1]).sum(axis=0) for d in range(degree + 1)]
            )
        e_j = (coefficients * binomial(log_fact, n_zero[None, :], offset[None, :] - degrees)).sum(axis=0)
        within += class_counts[x_index] * x_probability * e_j
    contribution[active] = within / (m * subset_count)
    return running_sum(before * contribution / (positions + 1))


def expected_hit(layout: Layout, relevant: ItemValue, n_relevant: np.ndarray) -> np.ndarray:
    """E[Hit@k] = P(#relevant in top k ≥ N+) for every k: (Q, K) (1 when the whole gold set is in).

    At cutoff k only the group G of rank k is uncertain: ``R_before`` relevant items rank before it
    and t = k − c of its m items (``r_G`` relevant) enter the top k, a uniform t-subset, so the
    relevant ones among them are hypergeometric:
    ``E = Σ_{j ≥ N+ − R_before} C(r_G, j) C(m − r_G, t − j) / C(m, t)``. With ``rel_level ≥ 1`` every
    relevant candidate is judged, so only ``j = r_G`` can reach N+: ``C(m − r_G, t − r_G) / C(m, t)``.
    """
    kmax = layout.kmax
    before = layout.sum_before_group(relevant)
    need = n_relevant[:, None] - before
    r = layout.group_sums(relevant)
    if layout.singleton:
        return (r >= need).astype(np.float64)
    m = layout.size
    t = np.arange(1, kmax + 1)[None, :] - layout.start
    low = np.maximum(need, 0)
    high = np.minimum(r, t)
    log_fact = log_factorials(int(m.max(initial=0)))
    out = np.zeros(m.shape)
    for extra in range(int(np.max(high - low, initial=-1)) + 1):
        j = low + extra
        out += np.where(j <= high, binomial(log_fact, r, j) * binomial_ratio(log_fact, m - r, t - j, m, t), 0.0)
    return out

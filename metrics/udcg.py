"""UDCG, utility- and distraction-aware cumulative gain (Trappolini et al., arXiv 2510.21440).

The definition implemented is the authors' reference code (github.com/GiovanniTRA/UDCG,
``src/compute_udcg_scores.py``): each passage scores ``s = u`` (its utility, weight 1) when it is
relevant and ``s = −λ·d`` (its distraction, λ = 1/3) when it is not, u and d in [0, 1]; the positional
discount is uniform over the k passages an LLM reads, and the mean goes through a sigmoid:
``UDCG@k = σ((1/k) Σ_{r ≤ k} s_r)``, σ(x) = 1 / (1 + e^(−x)). Missing positions (fewer than k
candidates) score 0. Labels live in the item labels ``utility`` (default 1: a relevant passage
without a label is fully useful) and ``distraction`` (default 0: neutral).

σ is increasing, so the best and worst tie orders sort each group by s, and PROC takes the k
largest s of the pool. The expectation over tie orders has no closed form through σ: at cutoff k
the group G of rank k (c items before it, m in it) contributes a uniform t-subset (t = k − c), so
``E = Σ_T σ((S_before + Σ_{x∈T} s_x) / k) / C(m, t)``. It is computed exactly by grouping G's items
into classes of equal s: with the largest class as the bulk (value v₀, n₀ items), a choice of
j_c items from every other class has weight Π C(n_c, j_c) · C(n₀, t − Σ j_c) and sum
Σ j_c v_c + (t − Σ j_c) v₀. The choices enumerated per group are Π (n_c + 1) over the other
classes; past :data:`MAX_SUBSET_CLASSES` the evaluation is refused (a group tying that many
distinctly labelled passages across a cutoff).
"""

from __future__ import annotations

import numpy as np

from steadyrank.metrics.combinatorics import log_factorials
from steadyrank.metrics.layout import Layout
from steadyrank.metrics.values import ItemValue, gather, running_sum

UTILITY_LABEL, DISTRACTION_LABEL = "utility", "distraction"
#: Most choices of labelled items enumerated for one tie group cut by a cutoff.
MAX_SUBSET_CLASSES = 1 << 20


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def udcg_score(relevant: np.ndarray, utility: np.ndarray, distraction: np.ndarray, weight: float) -> np.ndarray:
    """s per item: utility if relevant, −λ·distraction otherwise."""
    return np.where(relevant, utility, -weight * distraction)


def _subset_means(values: np.ndarray, before: float, ts: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """E[σ((before + Σ of a uniform t-subset of ``values``) / k)] for each (t, k) pair."""
    classes, counts = np.unique(values, return_counts=True)
    bulk = int(np.argmax(counts))
    bulk_value, n_bulk = float(classes[bulk]), int(counts[bulk])
    others = [(float(v), int(n)) for i, (v, n) in enumerate(zip(classes, counts, strict=True)) if i != bulk]
    size = int(np.prod([n + 1 for _, n in others], dtype=np.float64))
    if size > MAX_SUBSET_CLASSES:
        raise ValueError(
            f"UDCG's expectation over a tie of {values.size} items with {len(others) + 1} distinct scores needs "
            f"{size} subset classes (limit {MAX_SUBSET_CLASSES}); break the tie or evaluate the oblivious order"
        )
    m = values.size
    log_fact = log_factorials(m)
    count, total, log_weight = np.zeros(1, dtype=np.int64), np.zeros(1), np.zeros(1)
    max_t = int(ts.max())
    for value, n in others:
        picks = np.arange(n + 1)
        count = (count[:, None] + picks[None, :]).ravel()
        total = (total[:, None] + picks[None, :] * value).ravel()
        log_weight = (log_weight[:, None] + (log_fact[n] - log_fact[picks] - log_fact[n - picks])[None, :]).ravel()
        keep = count <= max_t
        count, total, log_weight = count[keep], total[keep], log_weight[keep]
    out = np.empty(ts.size)
    for i, (t, k) in enumerate(zip(ts.tolist(), ks.tolist(), strict=True)):
        rest = t - count
        ok = (rest >= 0) & (rest <= n_bulk)
        r = rest[ok]
        log_w = log_weight[ok] + log_fact[n_bulk] - log_fact[r] - log_fact[n_bulk - r] - (
            log_fact[m] - log_fact[t] - log_fact[m - t])
        out[i] = float(np.sum(np.exp(log_w) * sigmoid((before + total[ok] + r * bulk_value) / k)))
    return out


def expected_udcg(layout: Layout, score: ItemValue) -> np.ndarray:
    """E[UDCG@k] for every k on ``layout``: (Q, K) (see the module docstring)."""
    kmax = layout.kmax
    ranked = layout.values(score)
    k = np.arange(1, kmax + 1)[None, :]
    if layout.singleton:
        return sigmoid(running_sum(ranked[:, :kmax]) / k)
    before = layout.sum_before_group(score)
    t = k - layout.start
    m = layout.size
    differs = layout.group_totals((ranked != gather(ranked, layout.group_start)).astype(np.float64)) > 0
    out = sigmoid((before + t * layout.group_totals(ranked) / m) / k)
    for q, start in {(int(q), int(layout.start[q, p])) for q, p in np.argwhere(differs & (t < m))}:
        end = int(layout.group_end[q, start])
        cut = np.arange(start, min(end - 1, kmax))  # positions whose cutoff k = p + 1 leaves part of the group out
        out[q, cut] = _subset_means(ranked[q, start:end], float(before[q, cut[0]]), cut + 1 - start, cut + 1)
    return out

"""Plain, loop-based reference implementations of every metric on ONE fixed ranked list.

Written independently of ``metrics/`` (straight from docs/ARCHITECTURE.md "Metric definitions") so that the
closed forms can be checked against brute-force enumeration of tie orders.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

RARITY_BASE = {5: 1.0, 4: 0.5, 3: 0.1}


def rarity_weights(pool: Sequence[float], alpha: float = 1.0, cap4: float = 1.0, cap3: float = 0.25) -> dict[float, float]:
    n = len(pool)
    counts = {g: sum(1 for x in pool if x == g) for g in (5, 4, 3)}
    if counts[5] == 0:
        return {5: 1.0, 4: 1.0, 3: 0.2}
    r = {g: (RARITY_BASE[g] / (counts[g] / n) ** alpha if counts[g] else 0.0) for g in (5, 4, 3)}
    return {5: 1.0, 4: min(r[4] / r[5], cap4), 3: min(r[3] / r[5], cap3)}


def novelty_gain(weights: Sequence[float], sources: Sequence[object], beta: float) -> float:
    """Σ w·δ down a ranked list: δ = 1 for the first positive-weight item of a source, β after."""
    seen, total = set(), 0.0
    for w, source in zip(weights, sources, strict=True):
        if w > 0:
            total += w if source not in seen else beta * w
            seen.add(source)
    return total


def metric(name: str, k: int, ranked: Sequence[float], judged: Sequence[float], *, rel_level: float = 1,
           gmax: float = 3, rubric: Sequence[float] | None = None, judged_rubric: Sequence[float] | None = None,
           alpha: float = 1.0, cap4: float = 1.0, cap3: float = 0.25, beta: float = 0.5, distraction_weight: float = 1 / 3,
           sources: Sequence[object] | None = None, judged_sources: Sequence[object] | None = None,
           utility: Sequence[float] | None = None, distraction: Sequence[float] | None = None):
    """The metric of one ranked list of grades (unjudged = 0); None where NA.

    ``sources``/``judged_sources``: each item's source (``ra_nwg_novelty``); ``utility``/``distraction``:
    each ranked item's UDCG labels.
    """
    rubric = list(ranked) if rubric is None else list(rubric)
    judged_rubric = list(judged) if judged_rubric is None else list(judged_rubric)
    top = list(ranked[:k])
    rel = [1.0 if g >= rel_level else 0.0 for g in top]
    n_plus = sum(1 for g in judged if g >= rel_level)
    hits = sum(rel)
    if name == "hits":
        return hits
    if name == "precision":
        return hits / k
    if name == "f1":
        return 2 * hits / (k + n_plus)
    if name == "recall":
        return hits / n_plus if n_plus else None
    if name in ("ndcg", "ndcg_exp"):
        if not n_plus:
            return None
        gain = (lambda g: max(g, 0)) if name == "ndcg" else (lambda g: 2 ** max(g, 0) - 1)
        dcg = sum(gain(g) / math.log2(i + 2) for i, g in enumerate(top))
        ideal = sorted((gain(g) for g in judged), reverse=True)[:k]
        idcg = sum(v / math.log2(i + 2) for i, v in enumerate(ideal))
        return dcg / idcg if idcg > 0 else None
    if name == "mrr":
        if not n_plus:
            return None
        return next((1.0 / (i + 1) for i, r in enumerate(rel) if r), 0.0)
    if name == "map":
        if not n_plus:
            return None
        total, found = 0.0, 0
        for i, r in enumerate(rel):
            if r:
                found += 1
                total += found / (i + 1)
        return total / n_plus
    if name == "err":
        if not n_plus:
            return None
        value, keep_going = 0.0, 1.0
        for i, g in enumerate(top):
            stop = (2 ** max(g, 0) - 1) / 2**gmax
            value += keep_going * stop / (i + 1)
            keep_going *= 1 - stop
        return value
    if name == "hit":
        return (1.0 if hits >= n_plus else 0.0) if n_plus else None
    if name == "udcg":
        scores = [u if g >= rel_level else -distraction_weight * d
                  for g, u, d in zip(top, utility[:k], distraction[:k], strict=True)]
        return 1.0 / (1.0 + math.exp(-sum(scores) / k))
    top_rubric = rubric[:k]
    if name == "ra_nwg_novelty":
        w = rarity_weights(judged_rubric, alpha, cap4, cap3)
        pool = [(w.get(g, 0.0), s) for g, s in zip(judged_rubric, judged_sources, strict=True)]
        subsets = (sorted(c, key=lambda item: -item[0]) for c in itertools.combinations(pool, min(k, len(pool))))
        ideal = max((novelty_gain([x for x, _ in c], [s for _, s in c], beta) for c in subsets), default=0.0)
        gain = novelty_gain([w.get(g, 0.0) for g in top_rubric], sources[:k], beta)
        return gain / ideal if ideal > 0 else None
    if name == "ra_nwg":
        w = rarity_weights(judged_rubric, alpha, cap4, cap3)
        denominator = sum(sorted((w.get(g, 0.0) for g in judged_rubric), reverse=True)[:k])
        return sum(w.get(g, 0.0) for g in top_rubric) / denominator if denominator > 0 else None
    if name in ("nrecall4", "nrecall5"):
        floor = 4 if name == "nrecall4" else 5
        pool = sum(1 for g in judged_rubric if g >= floor)
        return sum(1 for g in top_rubric if g >= floor) / min(k, pool) if pool else None
    if name == "precision4":
        return sum(1 for g in top_rubric if g >= 4) / k
    if name == "harm":
        return sum(1 for g in top_rubric if g <= 2) / k
    raise ValueError(name)


def tie_orders(scores: Sequence[float]):
    """Every ranking consistent with the scores: groups by score desc, all orders inside each."""
    groups = [[i for i, s in enumerate(scores) if s == v] for v in sorted(set(scores), reverse=True)]
    for combo in itertools.product(*(itertools.permutations(g) for g in groups)):
        yield [i for group in combo for i in group]

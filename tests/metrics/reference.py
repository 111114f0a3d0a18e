"""Plain, loop-based reference implementations of every metric on ONE fixed ranked list.

Written independently of ``metrics/`` (straight from docs/ARCHITECTURE.md "Metric definitions") so that the
closed forms can be checked against brute-force enumeration of tie orders.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

RARITY_BASE = {5: 1.0, 4: 0.5, 3: 0.1}


def rarity_weights(pool: Sequence[float]) -> dict[float, float]:
    n = len(pool)
    counts = {g: sum(1 for x in pool if x == g) for g in (5, 4, 3)}
    if counts[5] == 0:
        return {5: 1.0, 4: 1.0, 3: 0.2}
    r = {g: (RARITY_BASE[g] / (counts[g] / n) if counts[g] else 0.0) for g in (5, 4, 3)}
    return {5: 1.0, 4: min(r[4] / r[5], 1.0), 3: min(r[3] / r[5], 0.25)}


def metric(name: str, k: int, ranked: Sequence[float], judged: Sequence[float], *, rel_level: float = 1,
           gmax: float = 3, rubric: Sequence[float] | None = None, judged_rubric: Sequence[float] | None = None):
    """The metric of one ranked list of grades (unjudged = 0); None where NA."""
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
    top_rubric = rubric[:k]
    if name == "ra_nwg":
        w = rarity_weights(judged_rubric)
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

"""The batch engine: tie-aware statistics of many measures over a padded batch of queries.

Input is a :class:`Batch` (scores, grades and judged pools as padded numpy arrays). For every
measure it returns per-query arrays of the expected value over tie orders, the min and max (each
tie group sorted by the metric's item value ascending / descending), the tie-oblivious value on
one fixed order, and PROC (the metric of the best ordering of the whole candidate pool). NA
entries are NaN.

Cost: stage one (:mod:`steadyrank.metrics.compact`) is one ``argpartition`` per row at the largest
cutoff K plus a word-wise scan for judged candidates; it leaves each query's top K (and its
boundary tie group where a judged candidate is in it) and its judged candidates. Stage two sorts
those few items per row and splits the queries: where no judged candidate shares its score with
another ranked item, every tie order gives the same value, so the expected value, min, max and the
oblivious value are one fixed-order computation; only the other queries get the closed forms over
tie groups and the min/max orders.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Literal, TypeVar, cast

import numpy as np

from steadyrank.metrics.batch import Batch
from steadyrank.metrics.compact import CompactBatch, compact_batch
from steadyrank.metrics.layout import Layout
from steadyrank.metrics.measures import Measure
from steadyrank.metrics.params import MetricParams
from steadyrank.metrics.registry import ItemValueDefinition, MetricDefinition, metric_definition
from steadyrank.metrics.values import ItemGrid, ItemValue, Transform, gather

__all__ = ["STATS", "Batch", "ItemContext", "TieBreak", "evaluate_batch"]

TieBreak = Literal["input", "docid"]
STATS = ("expected", "min", "max", "oblivious", "proc")
T = TypeVar("T")


class ItemContext:
    """Per-batch inputs of the metric definitions: item values, judged-pool quantities, a cache.

    ``item(definition)`` builds each :class:`~steadyrank.metrics.registry.ItemValueDefinition` once per
    batch; ``cached(key, compute)`` memoises the pool quantities the registry derives (IDCG, RA-nWG
    weights and ideals) so metrics and statistics share them. ``ranking`` and ``pool`` are the grids
    of the ranked candidates and of the candidate pool (PROC).
    """

    def __init__(self, batch: CompactBatch, rel_level: float, gmax: float, params: MetricParams) -> None:
        self.batch, self.rel_level, self.gmax, self.params = batch, rel_level, gmax, params
        self.judged, self.judged_rubric, self.judged_labels = batch.judged, batch.judged_rubric, batch.judged_labels
        self._cache: dict[object, object] = {}
        self.n_relevant = (batch.judged >= rel_level).sum(axis=1).astype(np.float64)
        self.ranking = ItemGrid(batch.ranking)
        self.pool = ItemGrid(batch.pool)

    def value(self, transform: Transform) -> ItemValue:
        """An ad-hoc item value of this batch."""
        return ItemValue(transform)

    def item(self, definition: ItemValueDefinition) -> ItemValue:
        """The item value of ``definition`` on this batch (built once)."""
        return self.cached(("item", definition.key), lambda: self.value(definition.build(self)))

    def cached(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()`` the first time ``key`` is asked for, the stored result afterwards."""
        if key not in self._cache:
            self._cache[key] = compute()
        return cast(T, self._cache[key])  # the value compute() stored under this key


def _rank(batch: CompactBatch, tie_break: TieBreak) -> np.ndarray | None:
    """The compact columns by score descending, ties by docid rank; ``None``: the compact rows' own
    order (stage one sorted them with ties in input order)."""
    if tie_break == "docid" and batch.docid_rank is not None:
        return np.lexsort((batch.docid_rank, -batch.scores), axis=1)
    return None


def _statistics(
    items: ItemContext, order: np.ndarray | None, by_name: dict[str, list[Measure]], stats: tuple[str, ...],
) -> dict[Measure, dict[str, np.ndarray]]:
    """The statistics ``stats`` of every measure on ``items.batch``, its columns ranked by ``order``."""
    batch = items.batch
    kmax = batch.kmax
    layouts: dict[str, Layout] = {"oblivious": Layout.fixed(items.ranking, order, kmax)}
    sorted_scores = batch.scores if order is None else gather(batch.scores, order)
    tied = Layout.tied(items.ranking, order, sorted_scores, kmax) if "expected" in stats else None
    if tied is not None:
        layouts["expected"] = tied
    ordered: dict[tuple[str, bool, str], Layout] = {}

    def value(stat: str, definition: MetricDefinition) -> np.ndarray:
        if stat in ("min", "max") and definition.extreme is not None and tied is not None:
            return definition.extreme(items, tied, stat == "max")
        return definition.assemble(items, layout_for(stat, definition), kmax)

    def layout_for(stat: str, definition: MetricDefinition) -> Layout:
        if stat in layouts:
            return layouts[stat]
        descending = stat == "max" or (stat == "proc" and not definition.lower_is_better)
        cache_key = (stat if stat == "proc" else "extreme", descending, definition.item.key)
        if cache_key not in ordered:
            item = items.item(definition.item)
            if stat == "proc":  # the best order of the whole pool (invalid items last)
                values = items.pool.values(item)
                keys = np.where(batch.pool.valid, -values if descending else values, np.inf)
                # Items of equal value are interchangeable in every metric's PROC (its value is a function
                # of the sorted values), so the faster unstable sort will do.
                ordered[cache_key] = Layout.fixed(items.pool, np.argsort(keys, axis=1), kmax)
            else:  # each tie group sorted by the item value
                values = items.ranking.values(item)
                sort_order = np.lexsort((-values if descending else values, -batch.scores), axis=1)
                ordered[cache_key] = Layout.fixed(items.ranking, sort_order, kmax)
        return ordered[cache_key]

    results: dict[Measure, dict[str, np.ndarray]] = {}
    for name, group in by_name.items():
        definition = metric_definition(name)
        cutoffs = [m.k - 1 for m in group]
        with np.errstate(divide="ignore", invalid="ignore"):
            defined = np.broadcast_to(definition.defined(items, kmax), (batch.n_queries, kmax))[:, cutoffs]
            per_stat = {stat: np.where(defined, value(stat, definition)[:, cutoffs], np.nan) for stat in stats}
        for i, measure in enumerate(group):
            results[measure] = {stat: per_stat[stat][:, i] for stat in stats}
    return results


def evaluate_batch(
    batch: Batch,
    measures: list[Measure],
    *,
    rel_level: float = 1,
    gmax: float | None = None,
    tie_break: TieBreak = "input",
    params: MetricParams | None = None,
) -> dict[Measure, dict[str, np.ndarray]]:
    """Per-query statistics of every measure: ``{measure: {stat: (Q,) array}}``, stat in STATS.

    ``params`` holds the constants of RA-nWG, its novelty-discounted variant and UDCG (defaults:
    :class:`~steadyrank.metrics.params.MetricParams`).
    """
    params = MetricParams() if params is None else params
    if tie_break not in ("input", "docid"):
        raise ValueError(f"tie_break must be 'input' or 'docid', got {tie_break!r}")
    if tie_break == "docid" and batch.docid_rank is None:
        raise ValueError("tie_break='docid' needs docid ranks in the batch")
    kmax = max(m.k for m in measures)
    largest_grade = float(np.nanmax(batch.judged, initial=0.0))  # candidates' grades come from the qrels
    if gmax is None:
        gmax = largest_grade
    elif gmax < largest_grade:
        raise ValueError(f"gmax {gmax:g} is below the largest grade {largest_grade:g} in the data")
    compact = compact_batch(batch, kmax)
    order = _rank(compact, tie_break)
    by_name: dict[str, list[Measure]] = {}
    for measure in measures:
        by_name.setdefault(measure.name, []).append(measure)
    # Every row: the oblivious value and PROC; where no tie touches a special item, that fixed
    # order's value is also the expected value, the min and the max.
    for name in by_name:
        missing = [label for label in metric_definition(name).labels if label not in batch.labels]
        if missing:
            raise ValueError(f"metric {name!r} needs the item labels {missing} (none were given)")
    # the oblivious order in input order reads only the first K ranks of each compact row
    fixed = compact.head() if order is None else compact
    out = _statistics(ItemContext(fixed, rel_level, gmax, params), order, by_name, ("oblivious", "proc"))
    for per_stat in out.values():
        oblivious = per_stat["oblivious"]
        per_stat.update(expected=np.copy(oblivious), min=np.copy(oblivious), max=np.copy(oblivious))
    tied = np.flatnonzero(compact.tied)
    if tied.size:
        items = ItemContext(compact.rows(tied), rel_level, gmax, params)
        part = _statistics(items, None if order is None else order[tied], by_name, ("expected", "min", "max"))
        for measure, per_stat in part.items():
            for stat, values in per_stat.items():
                out[measure][stat][tied] = values
    return {m: {stat: out[m][stat] for stat in STATS} for m in measures}

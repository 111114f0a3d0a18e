"""The batch engine: tie-aware statistics of many measures over a padded batch of queries.

Input is a :class:`Batch` (scores, grades and judged pools as padded numpy arrays). For every
measure it returns per-query arrays of the expected value over tie orders, the min and max (each
tie group sorted by the metric's item value ascending / descending), the tie-oblivious value on
one fixed order, and PROC (the metric of the best ordering of the whole candidate pool). NA
entries are NaN.

Cost: one ``argpartition`` at the largest cutoff K shared by all measures and cutoffs, one
O(M + K log K) order per (item value, direction) for the boundary group of size M, and O(K)
closed forms; nothing sorts a whole candidate list.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Literal, TypeVar, cast

import numpy as np

from steadyrank.metrics.layout import Layout, PartialSort, best_order, compact_columns
from steadyrank.metrics.measures import Measure
from steadyrank.metrics.registry import ItemValueDefinition, MetricDefinition, metric_definition
from steadyrank.metrics.values import GradeGrid, ItemValue, Transform, gather

TieBreak = Literal["input", "docid"]
STATS = ("expected", "min", "max", "oblivious", "proc")
T = TypeVar("T")


@dataclass
class Batch:
    """Padded arrays for Q queries (pads: score ``-inf``, grades 0, judged grades NaN).

    ``scores`` may be float32 or float64 (compared exactly as given). ``grades``/``rubric`` are the
    candidates' grades (unjudged = 0 / the rubric grade for unjudged); ``judged``/``judged_rubric``
    hold every judged grade of each query from the qrels (pool for N+, IDCG and RA-nWG).
    ``docid_rank`` orders candidates by docid descending (0 = largest docid), needed only for
    ``tie_break="docid"``. ``valid`` marks real candidates (derived from the scores if omitted).
    """

    scores: np.ndarray  # (Q, W) float
    grades: np.ndarray  # (Q, W) numeric (int or float)
    rubric: np.ndarray  # (Q, W) numeric
    judged: np.ndarray  # (Q, J) float64, NaN padded
    judged_rubric: np.ndarray  # (Q, J) float64, NaN padded
    docid_rank: np.ndarray | None = None  # (Q, W) int
    valid: np.ndarray | None = None  # (Q, W) bool

    def __post_init__(self) -> None:
        if self.valid is None:
            self.valid = np.isfinite(self.scores)

    @property
    def valid_mask(self) -> np.ndarray:
        """``valid`` as set by construction (derived from the scores when it was omitted)."""
        return np.isfinite(self.scores) if self.valid is None else self.valid

    def padded_to(self, width: int) -> Batch:
        """The same batch with at least ``width`` columns."""
        extra = width - self.scores.shape[1]
        if extra <= 0:
            return self

        def pad(a: np.ndarray, value: float) -> np.ndarray:
            return np.pad(a, ((0, 0), (0, extra)), constant_values=value)

        rank = None if self.docid_rank is None else pad(self.docid_rank, np.iinfo(np.int64).max)
        rubric = pad(self.rubric, 0)
        return Batch(pad(self.scores, -np.inf), pad(self.grades, 0), rubric, self.judged, self.judged_rubric,
                     rank, pad(self.valid_mask, False))


class ItemContext:
    """Per-batch inputs of the metric definitions: lazy item values, judged-pool quantities, a cache.

    ``item(definition)`` builds each :class:`~steadyrank.metrics.registry.ItemValueDefinition` once per
    batch; ``cached(key, compute)`` memoises the pool quantities the registry derives (IDCG, RA-nWG
    weights and ideals) so metrics and statistics share them.
    """

    def __init__(self, batch: Batch, rel_level: float, gmax: float) -> None:
        self.batch, self.rel_level, self.gmax = batch, rel_level, gmax
        self._cache: dict[object, object] = {}
        self.n_relevant = (batch.judged >= rel_level).sum(axis=1).astype(np.float64)
        # A superset of the items with a non-zero value under any item value (judged ones).
        nonzero = batch.grades != 0
        if batch.rubric is not batch.grades:
            nonzero |= batch.rubric >= 3
        if rel_level <= 0:
            nonzero |= (batch.grades >= rel_level) & batch.valid_mask
        self.nonzero_mask = nonzero
        self.nonzero_cols = compact_columns(nonzero)
        self.grid = GradeGrid(batch.grades, batch.rubric, batch.valid_mask)

    def value(self, transform: Transform) -> ItemValue:
        """An ad-hoc lazy item value of this batch."""
        return ItemValue(self.grid, transform)

    def item(self, definition: ItemValueDefinition) -> ItemValue:
        """The item value of ``definition`` on this batch (built once)."""
        return self.cached(("item", definition.key), lambda: self.value(definition.build(self)))

    def cached(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()`` the first time ``key`` is asked for, the stored result afterwards."""
        if key not in self._cache:
            self._cache[key] = compute()
        return cast(T, self._cache[key])  # the value compute() stored under this key


def _cumulative(definition: MetricDefinition, layout: Layout, items: ItemContext, kmax: int,
                defined: np.ndarray) -> np.ndarray:
    """The metric's cumulative per-cutoff values on ``layout``: (Q, K), NaN where NA."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(defined, definition.assemble(items, layout, kmax), np.nan)


def evaluate_batch(
    batch: Batch,
    measures: list[Measure],
    *,
    rel_level: float = 1,
    gmax: float | None = None,
    tie_break: TieBreak = "input",
) -> dict[Measure, dict[str, np.ndarray]]:
    """Per-query statistics of every measure: ``{measure: {stat: (Q,) array}}``, stat in STATS."""
    if tie_break not in ("input", "docid"):
        raise ValueError(f"tie_break must be 'input' or 'docid', got {tie_break!r}")
    if tie_break == "docid" and batch.docid_rank is None:
        raise ValueError("tie_break='docid' needs docid ranks in the batch")
    kmax = max(m.k for m in measures)
    batch = batch.padded_to(kmax)
    largest_grade = float(np.nanmax(batch.judged, initial=0.0))  # candidates' grades come from the qrels
    if gmax is None:
        gmax = largest_grade
    elif gmax < largest_grade:
        raise ValueError(f"gmax {gmax:g} is below the largest grade {largest_grade:g} in the data")
    items = ItemContext(batch, rel_level, gmax)

    partial = PartialSort.of(batch.scores, kmax)
    docid_rank = batch.docid_rank  # set whenever tie_break is "docid" (checked above)
    if tie_break == "input" or docid_rank is None:
        oblivious_order = partial.fixed_order()
    else:
        oblivious_order = partial.fixed_order(lambda cols: gather(docid_rank, cols))
    layouts: dict[str, Layout] = {
        "expected": Layout.tied(partial, oblivious_order),
        "oblivious": Layout.fixed(oblivious_order),
    }
    ordered: dict[tuple[str, bool, str], Layout] = {}

    def layout_for(stat: str, definition: MetricDefinition) -> Layout:
        if stat in layouts:
            return layouts[stat]
        descending = stat == "max" or (stat == "proc" and not definition.lower_is_better)
        cache_key = (stat if stat == "proc" else "extreme", descending, definition.item.key)
        if cache_key not in ordered:
            item = items.item(definition.item)
            if stat == "proc":
                order = best_order(item, items.nonzero_cols, items.nonzero_mask, kmax, descending)
            else:
                order = partial.fixed_order((lambda cols: -item.at(cols)) if descending else item.at)
            ordered[cache_key] = Layout.fixed(order)
        return ordered[cache_key]

    results: dict[Measure, dict[str, np.ndarray]] = {}
    by_name: dict[str, list[Measure]] = {}
    for measure in measures:
        by_name.setdefault(measure.name, []).append(measure)
    for name, group in by_name.items():
        definition = metric_definition(name)
        with np.errstate(divide="ignore", invalid="ignore"):
            defined = definition.defined(items, kmax)
        per_stat = {stat: _cumulative(definition, layout_for(stat, definition), items, kmax, defined) for stat in STATS}
        for measure in group:
            results[measure] = {stat: per_stat[stat][:, measure.k - 1] for stat in STATS}
    return results

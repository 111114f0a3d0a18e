"""The public entry point: ``evaluate(run, qrels, measures)`` → tie-aware statistics.

``run`` maps query id → {docid: score} in the order the candidates arrived (that order is the
``input`` tie-break); ``qrels`` maps query id → {docid: grade}. Evaluated queries are those in
both. Queries are processed in chunks so that peak memory stays proportional to the chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from steadyrank.metrics.aggregate import macro_mean
from steadyrank.metrics.engine import STATS, Batch, TieBreak, evaluate_batch
from steadyrank.metrics.labels import LABEL_DEFAULTS, ItemLabels, label_arrays
from steadyrank.metrics.measures import Measure, parse_measures
from steadyrank.metrics.params import MetricParams
from steadyrank.metrics.ties import as_scores

Run = Mapping[str, Mapping[str, float]]
Qrels = Mapping[str, Mapping[str, float]]
#: Queries built into one padded batch from dictionaries (a (Q, W) float64 matrix per attribute).
CHUNK_QUERIES = 1024
#: Compact items (queries × cutoff) the engine's second stage works on at once for padded arrays,
#: which it reads as views: large enough that per-call overhead vanishes, small enough for the cache.
CHUNK_ITEMS = 1 << 18


@dataclass
class QueryStats:
    """Per-query arrays (aligned with ``Evaluation.query_ids``) of one measure; NaN = NA."""

    expected: np.ndarray
    min: np.ndarray
    max: np.ndarray
    oblivious: np.ndarray
    proc: np.ndarray

    @property
    def range(self) -> np.ndarray:
        """max − min: how far the tie order alone can move the metric (≥ 0: a rounding difference of
        two sums of the same values in different orders is not a negative range)."""
        return np.maximum(self.max - self.min, 0.0)

    @property
    def bias(self) -> np.ndarray:
        """oblivious − expected: the error of reporting one arbitrary tie order."""
        return self.oblivious - self.expected

    @property
    def proc_ratio(self) -> np.ndarray:
        """%PROC = expected / PROC (NaN where PROC is 0 or NA)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.proc > 0, self.expected / self.proc, np.nan)

    def stat(self, name: str) -> np.ndarray:
        return getattr(self, name)


SUMMARY_STATS = ("expected", "min", "max", "range", "oblivious", "bias")


@dataclass
class Evaluation:
    """Result of :func:`evaluate`: per-query statistics of each measure and their macro means."""

    query_ids: list[str]
    measures: list[Measure]
    stats: dict[Measure, QueryStats]

    def __getitem__(self, measure: str | Measure) -> QueryStats:
        return self.stats[parse_measures([measure])[0]]

    @property
    def summary(self) -> dict[str, dict[str, float | int]]:
        """``{"ndcg@10": {expected, min, max, range, oblivious, bias, n_valid, n_na, proc, proc_ratio}}``.

        Every value is a macro mean over the queries where the measure is defined (range and bias
        are means of the per-query range and bias, equal to differences of the means).
        """
        out: dict[str, dict[str, float | int]] = {}
        for measure in self.measures:
            stats = self.stats[measure]
            row: dict[str, float | int] = {name: macro_mean(stats.stat(name)).mean for name in SUMMARY_STATS}
            expected = macro_mean(stats.expected)
            row["n_valid"], row["n_na"] = expected.n_valid, expected.n_na
            row["proc"] = macro_mean(stats.proc).mean
            row["proc_ratio"] = macro_mean(stats.proc_ratio).mean
            out[str(measure)] = row
        return out

    @property
    def per_query(self) -> dict[str, dict[str, dict[str, float | None]]]:
        """``{qid: {"ndcg@10": {expected, min, max, range, oblivious, bias, proc, proc_ratio}}}``; NA → None."""
        names = SUMMARY_STATS + ("proc", "proc_ratio")
        columns = {(str(m), n): self.stats[m].stat(n) for m in self.measures for n in names}
        return {
            qid: {
                str(m): {n: (None if np.isnan(v := columns[(str(m), n)][i]) else float(v)) for n in names}
                for m in self.measures
            }
            for i, qid in enumerate(self.query_ids)
        }


def _judged_matrix(pools: Sequence[np.ndarray]) -> np.ndarray:
    width = max((p.size for p in pools), default=0)
    out = np.full((len(pools), width), np.nan)
    for i, pool in enumerate(pools):
        out[i, : pool.size] = pool
    return out


def _rubric_grades(
    grades: np.ndarray, judged: np.ndarray, rubric_map: Mapping[float, float] | None
) -> tuple[np.ndarray, np.ndarray]:
    """Candidate and pool grades on the 1–5 rubric (unchanged without a map; NaN pads stay NaN)."""
    if rubric_map is None:
        return grades, judged
    sources = np.array(list(rubric_map), dtype=np.float64)
    targets = np.array(list(rubric_map.values()), dtype=np.float64)

    def remap(values: np.ndarray) -> np.ndarray:
        out = values.astype(np.float64, copy=True)
        for source, target in zip(sources, targets, strict=True):
            out[values == source] = target
        return out

    return remap(grades), remap(judged)


def _unjudged_rubric(rubric_map: Mapping[float, float] | None) -> float:
    """The rubric grade of an unjudged candidate (grade 0): the map's key 0, else 0."""
    return float(rubric_map.get(0, 0)) if rubric_map is not None else 0.0


def build_batch(
    run: Run,
    qrels: Qrels,
    query_ids: Sequence[str],
    *,
    rubric_map: Mapping[float, float] | None = None,
    with_docid_rank: bool = False,
    labels: ItemLabels | None = None,
) -> Batch:
    """Padded arrays for ``query_ids`` (each in both run and qrels).

    ``rubric_map`` maps grades to the 1–5 rubric for the set metrics (key 0 also maps unjudged
    candidates); without it the set metrics read the grades as they are.
    """
    width = max((len(run[q]) for q in query_ids), default=0)
    n = len(query_ids)
    scores = np.full((n, max(width, 1)), -np.inf)
    grades = np.zeros(scores.shape)
    docid_rank = np.full(scores.shape, np.iinfo(np.int64).max, dtype=np.int64) if with_docid_rank else None
    judged_pools: list[np.ndarray] = []
    candidate_ids: list[list[str]] = []
    judged_ids: list[list[str]] = []
    for i, qid in enumerate(query_ids):
        candidates = run[qid]
        judgments = qrels[qid]
        docids = list(candidates)
        try:
            scores[i, : len(docids)] = as_scores(np.fromiter(candidates.values(), dtype=np.float64, count=len(docids)))
        except ValueError as exc:
            raise ValueError(f"query {qid}: {exc}") from None
        grades[i, : len(docids)] = [judgments.get(d, 0) for d in docids]
        judged_pools.append(np.fromiter(judgments.values(), dtype=np.float64, count=len(judgments)))
        candidate_ids.append(docids)
        judged_ids.append(list(judgments))
        if docid_rank is not None:
            order = np.argsort(np.array(docids, dtype=object), kind="stable")
            docid_rank[i, order] = np.arange(len(docids))[::-1]
    judged = _judged_matrix(judged_pools)
    rubric, judged_rubric = _rubric_grades(grades, judged, rubric_map)
    n_valid = np.array([len(run[q]) for q in query_ids], dtype=np.int64)
    per_candidate, per_judged = ({}, {}) if labels is None else label_arrays(
        labels, query_ids, candidate_ids, judged_ids, rubric, judged_rubric)
    return Batch(scores, grades, rubric, judged, judged_rubric, docid_rank, n_valid=n_valid,
                 unjudged_rubric=_unjudged_rubric(rubric_map), labels=per_candidate,
                 label_defaults={name: LABEL_DEFAULTS[name] for name in per_candidate}, judged_labels=per_judged)


def evaluate(
    run: Run,
    qrels: Qrels,
    measures: Sequence[str | Measure],
    *,
    rel_level: float = 1,
    tie_break: TieBreak = "input",
    gmax: float | None = None,
    rubric_map: Mapping[float, float] | None = None,
    params: MetricParams | None = None,
    labels: ItemLabels | None = None,
) -> Evaluation:
    """Tie-aware evaluation of ``run`` against ``qrels`` for every measure (e.g. ``"ndcg@10"``).

    ``rel_level``: binary relevance is ``grade >= rel_level``. ``tie_break``: the order used for
    the tie-oblivious value (``input`` = the run's own order, ``docid`` = trec_eval's docid
    descending). ``gmax``: ERR's maximum grade (default: the largest grade in the data).
    ``params``: RA-nWG's α and caps, novelty's β, UDCG's λ. ``labels``: document sources
    (``ra_nwg_novelty``) and utility/distraction labels (``udcg``).
    """
    parsed = parse_measures(list(measures))
    query_ids = [q for q in run if q in qrels]
    if gmax is None:
        gmax = max((float(g) for q in query_ids for g in qrels[q].values()), default=0.0)

    def chunk(begin: int, end: int) -> Batch:
        return build_batch(run, qrels, query_ids[begin:end], rubric_map=rubric_map,
                           with_docid_rank=tie_break == "docid", labels=labels)

    return _evaluate_chunks(chunk, query_ids, parsed, CHUNK_QUERIES, rel_level=rel_level, gmax=gmax,
                            tie_break=tie_break, params=params)


def evaluate_arrays(
    scores: np.ndarray,
    grades: np.ndarray,
    judged: np.ndarray,
    measures: Sequence[str | Measure],
    *,
    lengths: np.ndarray | None = None,
    rel_level: float = 1,
    gmax: float | None = None,
    rubric_map: Mapping[float, float] | None = None,
    query_ids: Sequence[str] | None = None,
    params: MetricParams | None = None,
) -> Evaluation:
    """Tie-aware evaluation of padded arrays, without building dictionaries.

    ``scores`` (Q, L) in any float dtype (compared exactly as given) with the candidates of each
    query in input order; ``lengths`` (Q,) the number of valid leading candidates per row
    (default: all L); ``grades`` (Q, L) the candidates' grades (unjudged = 0), taken from the
    judged pool; ``judged`` (Q, J) every judged grade of each query from the qrels, NaN padded. The
    tie-oblivious value uses the input order.
    """
    parsed = parse_measures(list(measures))
    n_queries: int
    width: int
    n_queries, width = scores.shape
    if grades.shape != scores.shape or judged.shape[0] != n_queries:
        raise ValueError(f"shape mismatch: scores {scores.shape}, grades {grades.shape}, judged {judged.shape}")
    lengths = np.full(n_queries, width) if lengths is None else np.asarray(lengths)
    ids = list(map(str, range(n_queries))) if query_ids is None else list(query_ids)
    if gmax is None:
        gmax = float(np.nanmax(judged, initial=0.0))

    score_dtype = np.float32 if scores.dtype.itemsize <= 4 else np.float64  # both exact for the input

    full_rows = bool((lengths == width).all())

    def chunk(begin: int, end: int) -> Batch:
        chunk_scores = scores[begin:end].astype(score_dtype, copy=False)
        chunk_grades = grades[begin:end]
        valid = None  # full rows: every candidate is real (the engine checks the scores are finite)
        if not full_rows:
            valid = np.arange(width)[None, :] < lengths[begin:end, None]
            if not np.isfinite(chunk_scores[valid]).all():
                raise ValueError("scores must be finite (NaN or inf found)")
            chunk_scores = np.where(valid, chunk_scores, -np.inf).astype(score_dtype, copy=False)
            chunk_grades = np.where(valid, chunk_grades, 0)
        chunk_judged = judged[begin:end].astype(np.float64)
        rubric, judged_rubric = _rubric_grades(chunk_grades, chunk_judged, rubric_map)
        return Batch(chunk_scores, chunk_grades, rubric, chunk_judged, judged_rubric, valid=valid,
                     n_valid=lengths[begin:end], unjudged_rubric=_unjudged_rubric(rubric_map), require_finite=full_rows)

    kmax = max(m.k for m in parsed)
    rows_per_chunk = max(CHUNK_QUERIES, CHUNK_ITEMS // kmax)
    return _evaluate_chunks(chunk, ids, parsed, rows_per_chunk, rel_level=rel_level, gmax=gmax, tie_break="input",
                            params=params)


def _evaluate_chunks(
    make_batch: Callable[[int, int], Batch],
    query_ids: Sequence[str],
    measures: list[Measure],
    rows_per_chunk: int,
    *,
    rel_level: float,
    gmax: float,
    tie_break: TieBreak,
    params: MetricParams | None,
) -> Evaluation:
    """Evaluate ``make_batch(begin, end)`` for consecutive chunks of ``rows_per_chunk`` queries."""
    columns: dict[Measure, dict[str, list[np.ndarray]]] = {m: {s: [] for s in STATS} for m in measures}
    for begin in range(0, len(query_ids), rows_per_chunk):
        batch = make_batch(begin, min(begin + rows_per_chunk, len(query_ids)))
        result = evaluate_batch(batch, measures, rel_level=rel_level, gmax=gmax, tie_break=tie_break, params=params)
        for measure, per_stat in result.items():
            for stat, values in per_stat.items():
                columns[measure][stat].append(values)

    def joined(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0)

    stats = {m: QueryStats(**{s: joined(columns[m][s]) for s in STATS}) for m in measures}
    return Evaluation(list(query_ids), measures, stats)

"""Tie-aware retrieval metrics (pure numpy). docs/ARCHITECTURE.md "Metric definitions" has the formulas.

>>> from steadyrank.metrics import evaluate
>>> result = evaluate({"q1": {"a": 0.5, "b": 0.5}}, {"q1": {"b": 1}}, ["mrr@10"])
>>> result.summary["mrr@10"]["expected"], result.summary["mrr@10"]["range"]
(0.75, 0.5)
"""

from steadyrank.metrics.aggregate import ConfidenceInterval, MacroMean, bootstrap_ci, macro_mean, paired_bootstrap
from steadyrank.metrics.engine import Batch, evaluate_batch
from steadyrank.metrics.evaluate import Evaluation, QueryStats, build_batch, evaluate, evaluate_arrays
from steadyrank.metrics.io import (
    BeirData,
    FormatError,
    read_beir,
    read_beir_corpus,
    read_beir_queries,
    read_jsonl,
    read_qrels,
    read_trec_run,
    skipped_empty_warning,
    write_trec_run,
)
from steadyrank.metrics.labels import ItemLabels
from steadyrank.metrics.measures import METRIC_KEYS, Measure, parse_measure, parse_measures
from steadyrank.metrics.params import MetricParams
from steadyrank.metrics.registry import METRICS, MetricDefinition
from steadyrank.metrics.ties import as_scores, rank_order, straddling_group, tie_groups

__all__ = [
    "METRIC_KEYS", "METRICS", "ItemLabels", "MetricDefinition", "MetricParams", "Batch", "BeirData", "FormatError",
    "read_beir", "read_beir_corpus", "read_beir_queries", "read_jsonl", "read_qrels", "read_trec_run",
    "skipped_empty_warning", "write_trec_run", "ConfidenceInterval", "Evaluation", "MacroMean", "Measure", "QueryStats",
    "as_scores", "bootstrap_ci", "build_batch", "evaluate", "evaluate_arrays", "evaluate_batch", "macro_mean",
    "paired_bootstrap", "parse_measure", "parse_measures", "rank_order", "straddling_group", "tie_groups",
]

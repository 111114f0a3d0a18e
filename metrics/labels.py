"""Document labels beyond the grades, as the padded arrays of a batch.

``sources`` (docid → source or facet) feed the novelty-discounted RA-nWG; ``utility`` and
``distraction`` (qid → docid → a value in [0, 1]) feed UDCG. A document without a source is its
own; only documents that can carry an RA-nWG weight (rubric grade 3, 4 or 5) keep a source id in
the arrays (the others never count for novelty, and leaving them at the default keeps them out of
the engine's judged candidates). A passage without a utility label has utility 1, without a
distraction label distraction 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from steadyrank.metrics.novelty import SOURCE_LABEL
from steadyrank.metrics.udcg import DISTRACTION_LABEL, UTILITY_LABEL

#: The value of each label for a document that has none (and for pads).
LABEL_DEFAULTS: Mapping[str, float] = {SOURCE_LABEL: -1, UTILITY_LABEL: 1.0, DISTRACTION_LABEL: 0.0}
#: Rubric grades that carry an RA-nWG weight.
_WEIGHTED = (3, 4, 5)


@dataclass(frozen=True)
class ItemLabels:
    """Optional labels: ``sources`` per document, ``utility``/``distraction`` per query and document."""

    sources: Mapping[str, str] | None = None
    utility: Mapping[str, Mapping[str, float]] | None = None
    distraction: Mapping[str, Mapping[str, float]] | None = None

    def __post_init__(self) -> None:
        for name, table in (("utility", self.utility), ("distraction", self.distraction)):
            for qid, docs in (table or {}).items():
                for docid, value in docs.items():
                    if not 0.0 <= float(value) <= 1.0:
                        raise ValueError(f"{name} of query {qid} document {docid} is {value}: must be in [0, 1]")


def _source_ids(docids: Sequence[Sequence[str]], rubric: np.ndarray, sources: Mapping[str, str],
                ids: list[dict[object, int]]) -> np.ndarray:
    out = np.full(rubric.shape, -1, dtype=np.int64)
    for i, row in enumerate(docids):
        seen = ids[i]
        for j, docid in enumerate(row):
            if rubric[i, j] in _WEIGHTED:
                key = ("source", sources[docid]) if docid in sources else ("document", docid)
                out[i, j] = seen.setdefault(key, len(seen))
    return out


def label_arrays(
    labels: ItemLabels, query_ids: Sequence[str], candidates: Sequence[Sequence[str]], judged: Sequence[Sequence[str]],
    rubric: np.ndarray, judged_rubric: np.ndarray,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(candidate labels (Q, W), judged-pool labels (Q, J)) for the labels given, in the batch's layout."""
    per_candidate: dict[str, np.ndarray] = {}
    per_judged: dict[str, np.ndarray] = {}
    if labels.sources is not None:
        ids: list[dict[object, int]] = [{} for _ in query_ids]
        per_candidate[SOURCE_LABEL] = _source_ids(candidates, rubric, labels.sources, ids)
        per_judged[SOURCE_LABEL] = _source_ids(judged, judged_rubric, labels.sources, ids)
    for name, table in ((UTILITY_LABEL, labels.utility), (DISTRACTION_LABEL, labels.distraction)):
        if table is None:
            continue
        out = np.full(rubric.shape, LABEL_DEFAULTS[name])
        for i, (qid, row) in enumerate(zip(query_ids, candidates, strict=True)):
            given = table.get(qid, {})
            for j, docid in enumerate(row):
                if docid in given:
                    out[i, j] = given[docid]
        per_candidate[name] = out
    if labels.utility is not None or labels.distraction is not None:  # UDCG reads both
        for name in (UTILITY_LABEL, DISTRACTION_LABEL):
            per_candidate.setdefault(name, np.full(rubric.shape, LABEL_DEFAULTS[name]))
    return per_candidate, per_judged

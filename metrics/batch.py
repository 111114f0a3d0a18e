"""The engine's input: padded arrays of Q queries' candidates, judged pools and optional labels."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

_NO_LABELS: Mapping[str, np.ndarray] = MappingProxyType({})


@dataclass
class Batch:
    """Padded arrays for Q queries (pads: score ``-inf``, grades 0, judged grades NaN).

    ``scores`` may be float32 or float64 (compared exactly as given). ``grades``/``rubric`` are the
    candidates' grades (unjudged = 0 / ``unjudged_rubric``); ``judged``/``judged_rubric`` hold every
    judged grade of each query from the qrels (pool for N+, IDCG and RA-nWG). ``docid_rank`` orders
    candidates by docid descending (0 = largest docid), needed only for ``tie_break="docid"``.
    ``valid`` marks real candidates (derived from the scores if omitted) and ``n_valid`` counts
    them per row (derived if omitted). ``labels`` are extra per-candidate labels (Q, W) that some
    metrics read (an UDCG utility, a source id), with the value of an unlabelled candidate in
    ``label_defaults``; ``judged_labels`` are the same labels for the judged pool (Q, J).
    ``require_finite``: every candidate is real and a NaN or infinite score is an error, checked
    while the engine's first stage has the scores in cache.
    """

    scores: np.ndarray  # (Q, W) float
    grades: np.ndarray  # (Q, W) numeric (int or float)
    rubric: np.ndarray  # (Q, W) numeric
    judged: np.ndarray  # (Q, J) float64, NaN padded
    judged_rubric: np.ndarray  # (Q, J) float64, NaN padded
    docid_rank: np.ndarray | None = None  # (Q, W) int
    valid: np.ndarray | None = None  # (Q, W) bool
    n_valid: np.ndarray | None = None  # (Q,) int
    unjudged_rubric: float = 0.0
    labels: Mapping[str, np.ndarray] = field(default_factory=lambda: _NO_LABELS)
    label_defaults: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    judged_labels: Mapping[str, np.ndarray] = field(default_factory=lambda: _NO_LABELS)
    #: Refuse (ValueError) any score that is not finite: for batches whose every candidate is real.
    require_finite: bool = False

    def __post_init__(self) -> None:
        missing = set(self.labels) - set(self.label_defaults)
        if missing:
            raise ValueError(f"labels without a default value: {sorted(missing)}")

    @property
    def valid_mask(self) -> np.ndarray:
        """``valid`` as given, else derived from the scores (finite = real candidate)."""
        return np.isfinite(self.scores) if self.valid is None else self.valid

    def valid_counts(self) -> np.ndarray:
        """``n_valid`` as given, else counted from :attr:`valid_mask` (a pass over the batch)."""
        if self.n_valid is not None:
            return np.asarray(self.n_valid, dtype=np.int64)
        return self.valid_mask.sum(axis=1).astype(np.int64)

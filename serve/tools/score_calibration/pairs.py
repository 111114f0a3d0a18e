"""A golden set's judged (query, document) pairs with their texts, and the seeded split by query."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from steadyrank.serve.server.quality.golden_sets import GoldenSet


@dataclass(frozen=True)
class JudgedPairs:
    """One row per judged pair, in golden-set order: query id and text, document id and text, rubric grade."""

    query_ids: list[str]
    queries: list[str]
    doc_ids: list[str]
    texts: list[str]
    grades: np.ndarray  # int64 (n,)

    def __len__(self) -> int:
        return len(self.doc_ids)


def judged_pairs(golden: GoldenSet, documents: Mapping[str, str]) -> JudgedPairs:
    """Every judgment of ``golden`` whose document is in ``documents`` (id → text). A judged id the
    corpus lacks is refused (ValueError naming how many and a few): the pair cannot be scored, and
    leaving it out would change the outcome rates silently."""
    rows = [(q.query_id, q.query, doc, grade) for q in golden.queries.values() for doc, grade in q.judgments.items()]
    missing = [doc for _, _, doc, _ in rows if doc not in documents]
    if missing:
        raise ValueError(f"{len(missing)} of {len(rows)} judged documents are not in the corpus "
                         f"(e.g. {', '.join(map(repr, missing[:5]))}): pass the corpus the golden set judges")
    return JudgedPairs(query_ids=[r[0] for r in rows], queries=[r[1] for r in rows], doc_ids=[r[2] for r in rows],
                       texts=[documents[r[2]] for r in rows], grades=np.array([r[3] for r in rows], dtype=np.int64))


def split_by_query(query_ids: list[str], fit_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks ``(fit, held_out)`` over the pairs: the distinct query ids, sorted, are shuffled
    by ``numpy.random.default_rng(seed)``; the first ``round(fit_fraction · queries)`` (at least one,
    at most all but one) are the fit queries, the others held out. Every pair of a query falls in
    its query's half, so no query is graded on what it was fitted on."""
    if not 0 < fit_fraction < 1:
        raise ValueError(f"the fit fraction must lie strictly between 0 and 1, got {fit_fraction}")
    distinct = sorted(set(query_ids))
    if len(distinct) < 2:
        raise ValueError(f"the golden set has {len(distinct)} judged query: a fit half and a held-out half need ≥ 2")
    order = np.random.default_rng(seed).permutation(len(distinct))
    n_fit = min(max(round(fit_fraction * len(distinct)), 1), len(distinct) - 1)
    fit_queries = {distinct[i] for i in order[:n_fit]}
    fit = np.array([q in fit_queries for q in query_ids], dtype=bool)
    return fit, ~fit


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes, or of a folder's files (relative path and bytes, in sorted order)."""
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        if file != path:
            digest.update(str(file.relative_to(path)).encode() + b"\0")
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()

"""Pipeline hygiene: near-duplicate suppression among the candidates and a light lexical boost.

Both are optional stages of :mod:`retrieval.pipeline` (off by default; :class:`Hygiene`).

**Near-duplicate suppression** (stage ``dedup``, after ``retrieve``, before ``rerank``). Among the
``n`` retrieved candidates (``n ≤ k_high ≤`` :data:`DEDUP_MAX_CANDIDATES`), with ``v_i`` the FP32
unit vector the index stored for candidate ``i`` at indexing time, the similarity is the cosine
``s(i, j) = Σ_d v_i[d] · v_j[d]``, computed in float64 from the stored float32 values. Walking the
candidates in retrieval order, candidate ``j`` is *suppressed* when some earlier *kept* candidate
``i`` has ``s(i, j) ≥ threshold``; otherwise it is kept. Its *representative* is the kept candidate
of greatest similarity, equal similarities going to the earlier one. So the first candidate is
always kept, a suppressed candidate never suppresses another, and the result depends on the
retrieval order only (no set iteration, no sort that is not stable).

A suppressed candidate is **demoted**, not dropped: it is not reranked (no forward pass is spent
on it) and it is served after every kept candidate — after the reranked ones and the kept ones
that were not reranked — in retrieval order, with the served-score series continued below them.
Every candidate is still in the served list (nothing is lost); a suppressed one is always below
its representative.

**Lexical boost** (stage ``boost``, after the reranker's passes, before the served order). For each
reranked candidate ``d`` with rank key ``key(d)`` (FP32, HPS), the served rank key is::

    key'(d) = fl32( key(d) + w · overlap(q, d) ),   overlap(q, d) = |T(q) ∩ T(d)| / |T(q)|

``T(x)``: the set of terms of ``x`` under the default BM25 analysis (:class:`~retrieval.bm25.Bm25Settings`:
lower-cased ``\\b\\w\\w+\\b`` tokens, English stopwords removed, English Snowball stemming);
``overlap = 0`` when the query has no term. ``w ≥ 0`` is in rank-key units (a logit for a
cross-encoder, a cosine for a bi-encoder); the sum is taken in float64 and rounded once to float32,
so the keys stay FP32 as every other rank key. The served order is then the usual rule on ``key'``
(descending, equal keys by retrieval order). Ties: two candidates with equal ``key'`` are tied
whatever their raw keys were. A tie straddling ``top_n`` is re-scored in FP32 as without the boost,
and each re-scored key gets the same ``w · overlap`` added (in float64), so the boost is applied
identically on both sides of the boundary re-score. Routing signals are computed on the reranker's
first-pass scores, before the boost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from steadyrank.retrieval.candidate_pool import CandidatePool

#: The most candidates near-duplicate suppression compares (its work is O(n² · dim)); a larger
#: ``k_high`` with suppression on is refused before any retrieval.
DEDUP_MAX_CANDIDATES = 1000


@dataclass(frozen=True)
class Hygiene:
    """Which hygiene stages run. ``dedup_threshold``: cosine at or above which a later candidate is
    suppressed (None: off), in [−1, 1]. ``boost_weight``: ``w`` of the lexical boost (0: off), ≥ 0
    and finite (module docstring)."""

    dedup_threshold: float | None = None
    boost_weight: float = 0.0

    def __post_init__(self) -> None:
        if self.dedup_threshold is not None and not -1.0 <= self.dedup_threshold <= 1.0:
            raise ValueError(f"dedup threshold must be a cosine in [-1, 1], got {self.dedup_threshold}")
        if not (math.isfinite(self.boost_weight) and self.boost_weight >= 0):
            raise ValueError(f"boost weight must be finite and ≥ 0, got {self.boost_weight}")

    @property
    def boost_on(self) -> bool:
        return self.boost_weight > 0

    def check_depth(self, k_high: int) -> None:
        """Refuse a suppression over more than :data:`DEDUP_MAX_CANDIDATES` candidates (before any work)."""
        if self.dedup_threshold is not None and k_high > DEDUP_MAX_CANDIDATES:
            raise ValueError(f"near-duplicate suppression compares at most {DEDUP_MAX_CANDIDATES} candidates, "
                             f"k_high is {k_high}")

    def to_json(self) -> dict[str, float | None]:
        return {"dedup_threshold": self.dedup_threshold, "boost_weight": self.boost_weight}


#: Both stages off (the default everywhere).
NO_HYGIENE = Hygiene()


@dataclass(frozen=True)
class Suppression:
    """Result of :func:`near_duplicates` over ``n`` candidates: ``kept`` and ``suppressed`` input
    indices (ascending), and for each suppressed one the input index of its representative."""

    kept: np.ndarray
    suppressed: np.ndarray
    representative: np.ndarray


def near_duplicates(vectors: np.ndarray, threshold: float) -> Suppression:
    """The greedy suppression of the module docstring over the rows of ``vectors`` (retrieval order)."""
    matrix: np.ndarray = np.asarray(vectors, dtype=np.float64)
    n = matrix.shape[0]
    if n > DEDUP_MAX_CANDIDATES:
        raise ValueError(f"near-duplicate suppression compares at most {DEDUP_MAX_CANDIDATES} candidates, got {n}")
    similarity: np.ndarray = matrix @ np.transpose(matrix)
    kept: list[int] = []
    suppressed: list[int] = []
    representative: list[int] = []
    for j in range(n):
        if kept:
            to_kept: np.ndarray = similarity[kept, j]
            best = int(np.argmax(to_kept))  # first maximum: the earliest kept candidate among equals
            if to_kept[best] >= threshold:
                suppressed.append(j)
                representative.append(kept[best])
                continue
        kept.append(j)
    return Suppression(_indices(kept), _indices(suppressed), _indices(representative))


def _indices(values: list[int]) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


@dataclass(frozen=True)
class Deduplicated:
    """A pool with its suppressed candidates taken out: ``pool`` (the kept candidates, retrieval
    order) and ``demoted`` (suppressed id → its representative's id, retrieval order)."""

    pool: CandidatePool
    demoted: dict[str, str]


def suppress_near_duplicates(pool: CandidatePool, threshold: float) -> Deduplicated:
    """:func:`near_duplicates` over the pool's stored vectors; the kept candidates form the new pool."""
    if pool.vectors is None:
        raise ValueError("near-duplicate suppression needs the candidates' stored vectors (retrieve with_vectors)")
    found = near_duplicates(pool.vectors, threshold)
    keep = found.kept.tolist()
    ids = pool.doc_ids
    kept_pool = replace(pool, doc_ids=[ids[i] for i in keep], scores=pool.scores[found.kept],
                        documents=[pool.documents[i] for i in keep], vectors=pool.vectors[found.kept])
    demoted = {ids[int(s)]: ids[int(r)] for s, r in zip(found.suppressed, found.representative, strict=True)}
    return Deduplicated(kept_pool, demoted)


def query_term_overlap(query: str, texts: list[str]) -> np.ndarray:
    """``overlap(q, d)`` of the module docstring for each text, float64 in [0, 1]."""
    # imported here: bm25s (and numba under it) stays out of the processes that only read the settings
    # (the driver, the HTTP front; tests/serve/test_lean_processes.py)
    from steadyrank.retrieval.bm25 import Bm25Settings, term_ids

    ids = term_ids([query, *texts], Bm25Settings())
    query_terms = set(ids[0])
    if not query_terms or not texts:
        return np.zeros(len(texts), dtype=np.float64)
    return np.array([len(query_terms.intersection(terms)) / len(query_terms) for terms in ids[1:]],
                    dtype=np.float64)


def boosted_keys(keys: np.ndarray, overlap: np.ndarray, weight: float) -> np.ndarray:
    """``fl32(key + w · overlap)`` (module docstring), float32."""
    return (np.asarray(keys, dtype=np.float64) + weight * np.asarray(overlap, dtype=np.float64)).astype(np.float32)

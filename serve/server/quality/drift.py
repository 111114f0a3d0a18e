"""Golden drift: how far live queries are from the golden set, in the embedder's space.

All vectors are FP32 unit rows (the embedder's query embeddings; :func:`unit_rows` normalises
again, so a caller's rounding cannot change a distance by more than FP32 error). The distance of
two queries is the cosine distance ``1 − u·v``.

- **Distance to the golden set** of a live query ``q``: ``d(q) = min_g (1 − q·g)`` over the golden
  queries ``g`` (exact inner-product search, FAISS ``IndexFlatIP``).
- **Golden spread** ``τ``: the ``quantile`` (default 0.95; numpy's linear interpolation) of each
  golden query's distance to its nearest *other* golden query,
  ``τ = Q_0.95 { min_{g' ≠ g} (1 − g·g') : g ∈ G }``. A live query drawn from the golden queries' own
  distribution lies beyond ``τ`` with probability about ``1 − quantile`` (a new point against the
  n golden queries, as each golden query against its n − 1 others), so the **beyond share**
  ``B = |{q : d(q) > τ}| / N`` over the N sampled live queries is about 0.05 while the golden set
  still looks like the traffic, and grows as the traffic moves away from it.
- **Topics**: the golden queries clustered by spherical k-means (FAISS ``Kmeans``, seeded;
  ``k = min(clusters, |G|)``), each golden query in the cluster of its nearest centroid (largest
  inner product). Golden share of cluster c: ``g_c = |G_c| / |G|``. A live query within ``τ`` of
  the golden set is assigned to its nearest centroid; one beyond ``τ`` is *uncovered*. Live share
  ``l_c = |{covered q in c}| / N``, ``l_uncovered = B``, so ``Σ_c l_c + l_uncovered = 1``.
- **Topic distance**: the total-variation distance between the two distributions over the clusters
  plus ``uncovered`` (whose golden share is 0): ``TV = ½ (Σ_c |l_c − g_c| + l_uncovered)``, in [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The share label of live queries beyond the golden spread.
UNCOVERED = "uncovered"


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` as contiguous FP32 rows of unit L2 norm (a zero row stays zero)."""
    x = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
    if x.ndim != 2:
        raise ValueError(f"expected a 2-D array of vectors, got shape {x.shape}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.ascontiguousarray(x / np.where(norms > 0, norms, 1), dtype=np.float32)


def _flat_ip(vectors: np.ndarray):
    import faiss

    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    return index


def nearest(queries: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each unit row of ``queries``: (cosine distance to the nearest row of ``points``, its index)."""
    if len(queries) == 0:
        return np.zeros(0, np.float32), np.zeros(0, np.int64)
    similarity, index = _flat_ip(unit_rows(points)).search(unit_rows(queries), 1)
    return (1 - similarity[:, 0]).astype(np.float32), index[:, 0].astype(np.int64)


def nearest_other_distances(points: np.ndarray) -> np.ndarray:
    """Each row's cosine distance to its nearest *other* row (an exact duplicate gives 0)."""
    x = unit_rows(points)
    if len(x) < 2:
        raise ValueError("the golden spread needs at least 2 golden queries")
    similarity, index = _flat_ip(x).search(x, 2)
    own = index == np.arange(len(x))[:, None]
    # the best neighbour that is not the row itself; if neither of the two is, both tie the row (duplicates)
    other = np.where(own[:, 0], similarity[:, 1], similarity[:, 0])
    return (1 - other).astype(np.float32)


def spherical_kmeans(x: np.ndarray, k: int, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """FAISS spherical k-means (25 iterations, seeded) of unit rows ``x``: (k unit centroids, each
    row's cluster: the centroid of largest inner product)."""
    import faiss

    kmeans = faiss.Kmeans(x.shape[1], k, niter=25, seed=seed, spherical=True, min_points_per_centroid=1,
                          max_points_per_centroid=1 << 20, verbose=False)
    kmeans.train(x)
    if kmeans.centroids is None:
        raise RuntimeError("FAISS k-means produced no centroids")
    centroids = unit_rows(kmeans.centroids)
    return centroids, nearest(x, centroids)[1]


@dataclass(frozen=True)
class GoldenGeometry:
    """The golden set in the embedder's space: its vectors, spread ``τ`` and topics (module docstring)."""

    vectors: np.ndarray  # (|G|, dim) FP32 unit rows
    spread: float  # τ
    quantile: float
    centroids: np.ndarray  # (k, dim) FP32 unit rows
    golden_shares: np.ndarray  # (k,) g_c

    @classmethod
    def build(cls, vectors: np.ndarray, *, clusters: int, quantile: float, seed: int) -> GoldenGeometry:
        """Spread and spherical k-means topics of the golden vectors (``len(vectors) ≥ 2``)."""
        x = unit_rows(vectors)
        spread = float(np.quantile(nearest_other_distances(x), quantile))
        k = max(1, min(clusters, len(x)))
        centroids, labels = spherical_kmeans(x, k, seed=seed)
        shares = np.bincount(labels, minlength=k) / len(x)
        return cls(x, spread, quantile, centroids, shares)

    def place(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each live query's distance to the golden set and its topic: the nearest centroid's index,
        or -1 (uncovered) beyond the spread."""
        distance, _ = nearest(queries, self.vectors)
        _, topic = nearest(queries, self.centroids)
        return distance, np.where(distance > self.spread, -1, topic)


@dataclass(frozen=True)
class DriftReport:
    """Drift of N placed live queries against a :class:`GoldenGeometry` (module docstring)."""

    n: int
    distance_mean: float
    distance_p50: float
    distance_p95: float
    beyond_share: float  # B
    live_shares: dict[str, float]  # cluster index (as text) or "uncovered" → l
    golden_shares: dict[str, float]  # cluster index (as text) → g
    topic_distance: float  # TV

    @classmethod
    def measure(cls, geometry: GoldenGeometry, distances: np.ndarray, topics: np.ndarray) -> DriftReport:
        """The report over live queries placed by :meth:`GoldenGeometry.place` (N ≥ 1)."""
        n = len(distances)
        if n == 0:
            raise ValueError("no live query to measure")
        k = len(geometry.centroids)
        live = np.bincount(topics[topics >= 0], minlength=k) / n
        beyond = float(np.count_nonzero(topics < 0) / n)
        golden = geometry.golden_shares
        return cls(
            n=n, distance_mean=float(np.mean(distances)), distance_p50=float(np.quantile(distances, 0.5)),
            distance_p95=float(np.quantile(distances, 0.95)), beyond_share=beyond,
            live_shares={**{str(c): float(live[c]) for c in range(k)}, UNCOVERED: beyond},
            golden_shares={str(c): float(golden[c]) for c in range(k)},
            topic_distance=float(0.5 * (np.abs(live - golden).sum() + beyond)),
        )


def representatives(vectors: np.ndarray, n: int, *, seed: int) -> list[tuple[int, int]]:
    """Up to ``n`` (row index, cluster size) pairs: the rows clustered by spherical k-means
    (``k = min(n, rows)``, seeded), and of each non-empty cluster the row nearest its centroid
    (largest inner product), largest clusters first (ties: lower row index)."""
    x = unit_rows(vectors)
    if len(x) == 0 or n < 1:
        return []
    k = min(n, len(x))
    centroids, labels = spherical_kmeans(x, k, seed=seed)
    picks: list[tuple[int, int]] = []
    for c in range(k):
        members = np.flatnonzero(labels == c)
        if len(members):
            picks.append((int(members[np.argmax(x[members] @ centroids[c])]), len(members)))
    return sorted(picks, key=lambda p: (-p[1], p[0]))

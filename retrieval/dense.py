"""Dense retrieval with FAISS over L2-normalised vectors, configured by ``index_factory`` strings.

Scores are inner products; for unit vectors that is the cosine similarity, in [-1, 1].
Supported families: ``Flat`` (exact), ``HNSW<M>[,Flat|,SQ8|…]`` (``efSearch`` at query time) and
``IVF<nlist>[_HNSW…],Flat|SQ8|PQ<m>…`` (trained at build; ``nprobe`` at query time), optionally behind
a pre-transform such as ``OPQ16,`` or ``PCA256,``.

FAISS ids are the store's *slots* (0, 1, 2, … in insertion order). Deleted slots are excluded at
search time with an ``IDSelector`` (FAISS's own filtered search), so no index type needs
``remove_ids``; compaction later rebuilds without them.

GPU: with a GPU build of faiss and a visible GPU, Flat and IVF indexes are also copied to the GPU
and searched there while no slot is deleted (GPU FAISS lacks the CPU's IDSelector filtering).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np


@dataclass(frozen=True)
class DenseSettings:
    """FAISS configuration recorded in the manifest.

    ``ef_construction``: HNSW graph build breadth (higher = better graph, slower build).
    ``ef_search``: HNSW search breadth (higher = better recall, slower); must be ≥ k, raised to k.
    ``nprobe``: IVF lists visited per query (higher = better recall, slower).
    """

    factory: str = "Flat"
    ef_construction: int = 200
    ef_search: int = 128
    nprobe: int = 16


def _inner(index: faiss.Index) -> faiss.Index:
    """The index under a pre-transform (``OPQ…,`` / ``PCA…,``), downcast to its concrete type."""
    index = faiss.downcast_index(index)
    if isinstance(index, faiss.IndexPreTransform):
        return faiss.downcast_index(index.index)
    return index


def _hnsw(index: faiss.Index) -> faiss.IndexHNSW | None:
    inner = _inner(index)
    return inner if isinstance(inner, faiss.IndexHNSW) else None


def _gpu_available() -> bool:
    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


class DenseIndex:
    """A FAISS inner-product index whose ids are slots, plus its search settings."""

    def __init__(self, index: faiss.Index, settings: DenseSettings) -> None:
        if index.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise ValueError("dense index must use the inner-product metric")
        self.index = index
        self.settings = settings
        self._deleted: set[int] = set()
        self._params_cache: tuple[int, faiss.SearchParameters] | None = None
        self._gpu: faiss.Index | None = None
        if _gpu_available() and _hnsw(index) is None:
            self._gpu_resources = faiss.StandardGpuResources()
            try:
                self._gpu = faiss.index_cpu_to_gpu(self._gpu_resources, 0, index)
            except RuntimeError:  # a type GPU FAISS lacks: stay on the CPU
                self._gpu = None

    @classmethod
    def build(cls, vectors: np.ndarray, settings: DenseSettings) -> DenseIndex:
        """Create the index from ``settings.factory``, train it when needed, add ``vectors`` as slots 0…n−1."""
        vectors = _as_matrix(vectors)
        try:
            index = faiss.index_factory(vectors.shape[1], settings.factory, faiss.METRIC_INNER_PRODUCT)
        except RuntimeError as exc:
            raise ValueError(f"invalid FAISS factory string {settings.factory!r}: {str(exc).strip()}") from None
        hnsw = _hnsw(index)
        if hnsw is not None:
            hnsw.hnsw.efConstruction = settings.ef_construction
        if not index.is_trained:
            ivf = faiss.try_extract_index_ivf(index)
            if ivf is not None and vectors.shape[0] < ivf.nlist:
                raise ValueError(
                    f"factory {settings.factory!r} needs at least {ivf.nlist} vectors to train "
                    f"its {ivf.nlist} lists, got {vectors.shape[0]}: use fewer lists or 'Flat'/'HNSW32,Flat'"
                )
            index.train(vectors)
        index.add(vectors)
        return cls(index, settings)

    @classmethod
    def read(cls, path: Path, settings: DenseSettings) -> DenseIndex:
        """Load an index written by :meth:`write`."""
        return cls(faiss.read_index(str(path)), settings)

    def write(self, path: Path) -> None:
        """Serialise the CPU index to ``path`` (not fsynced: the caller makes it durable), streamed
        through a Python file so that a failed write raises ``OSError`` here like any other file's."""
        with open(path, "wb") as handle:
            faiss.write_index(self.index, _callback_writer(handle.write))

    def add(self, vectors: np.ndarray) -> None:
        """Append ``vectors`` as the next slots."""
        vectors = _as_matrix(vectors)
        if vectors.shape[1] != self.index.d:
            raise ValueError(f"vectors have dimension {vectors.shape[1]}, index has {self.index.d}")
        self.index.add(vectors)
        if self._gpu is not None:
            self._gpu.add(vectors)

    def delete(self, slots: Collection[int]) -> None:
        """Exclude ``slots`` from every later search (tombstones; the vectors stay until compaction)."""
        self._deleted.update(int(s) for s in slots)
        self._params_cache = None

    def _params(self, k: int) -> faiss.SearchParameters:
        """Search parameters: efSearch (raised to ``k``) or nprobe, and the deleted-slot filter."""
        if self._params_cache is not None and self._params_cache[0] == k:
            return self._params_cache[1]
        inner = _inner(self.index)
        if isinstance(inner, faiss.IndexHNSW):
            params = _hnsw_parameters(max(self.settings.ef_search, k))
        elif faiss.try_extract_index_ivf(inner) is not None:
            ivf = faiss.SearchParametersIVF()
            ivf.nprobe = self.settings.nprobe  # what faiss's keyword constructor does: assign after init
            params = ivf
        else:
            params = faiss.SearchParameters()
        if self._deleted:
            ids = np.fromiter(self._deleted, dtype=np.int64, count=len(self._deleted))
            params.sel = faiss.IDSelectorNot(faiss.IDSelectorBatch(ids))
        if isinstance(faiss.downcast_index(self.index), faiss.IndexPreTransform):
            pre_transform = faiss.SearchParametersPreTransform()
            pre_transform.index_params = params
            params = pre_transform
        self._params_cache = (k, params)
        return params

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` live slots per query row: ``(scores float32 (q, k), slots int64 (q, k))``.

        Rows are padded with slot −1 and score −inf when fewer than ``k`` live vectors are found.
        Equal scores are ordered by slot ascending, and a group of equal scores straddling the k-th
        place keeps its lowest slots: FAISS leaves both arbitrary, so more results are fetched
        until the group ends. Results are deterministic and a sharded index merges them exactly.
        """
        queries = _as_matrix(queries)
        fetch = k + 1
        while True:
            scores, slots = self._search(queries, fetch)
            straddling = (scores[:, k - 1] == scores[:, -1]) & (slots[:, -1] >= 0) if k > 0 else np.zeros(1, bool)
            if fetch >= self.index.ntotal or not np.any(straddling):
                break
            fetch = min(2 * fetch, self.index.ntotal)
        order = np.lexsort((np.where(slots >= 0, slots, np.iinfo(np.int64).max), -scores), axis=-1)[:, :k]
        return np.take_along_axis(scores, order, axis=-1), np.take_along_axis(slots, order, axis=-1)

    def _search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """One FAISS search: scores −inf where the slot is −1 (padding)."""
        if self._gpu is not None and not self._deleted:
            scores, slots = self._gpu.search(queries, k)
        else:
            scores, slots = self.index.search(queries, k, params=self._params(k))
        return np.where(slots >= 0, scores, -np.inf).astype(np.float32), slots


def _as_matrix(vectors: np.ndarray) -> np.ndarray:
    """C-contiguous float32 2-D view (what FAISS requires)."""
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError(f"expected a 2-D array of vectors, got shape {matrix.shape}")
    return matrix


# faiss's bundled stubs omit some of its SWIG classes: the two used here are reached through the
# module as an untyped value (a dynamic boundary) and returned as the stub base classes they derive from.
def _hnsw_parameters(ef_search: int) -> faiss.SearchParameters:
    """``faiss.SearchParametersHNSW(efSearch=ef_search)``."""
    untyped: Any = faiss
    return untyped.SearchParametersHNSW(efSearch=ef_search)


def _callback_writer(write: Callable[[bytes], object]) -> faiss.IOWriter:
    """``faiss.PyCallbackIOWriter(write)``: a faiss writer that hands every chunk to ``write``."""
    untyped: Any = faiss
    return untyped.PyCallbackIOWriter(write)

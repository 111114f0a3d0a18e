"""Building an index: embed the documents, build FAISS (and BM25), write the first generation.

The format written is :mod:`retrieval.generations`'s; :func:`build_index` refuses a directory that
holds anything else, and an index already there stays live until the new generation replaces it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from steadyrank.retrieval.bm25 import Bm25Index, Bm25Settings, Bm25Stats
from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.dense import DenseIndex, DenseSettings
from steadyrank.retrieval.fsio import WriterLock, make_dirs
from steadyrank.retrieval.generations import LOCK, MANIFEST, check_target, write_generation
from steadyrank.retrieval.protocols import Embedder

NORM_TOLERANCE = 1e-3

#: called with the number of documents just embedded (its return value is ignored: a tqdm bar's ``update`` fits)
ProgressCallback = Callable[[int], object]


def embed_documents(
    embedder: Embedder,
    documents: Sequence[Document],
    *,
    batch_size: int = 256,
    on_progress: ProgressCallback | None = None,
) -> np.ndarray:
    """``embedder.encode`` over ``full_text`` (after the embedder's document prompt) in batches: float32
    (n, dim), rows checked to be unit vectors.

    ``on_progress(n_done_in_batch)`` is called after every batch (drive a progress bar with it).
    """
    vectors = np.empty((len(documents), embedder.dim), dtype=np.float32)
    for start in range(0, len(documents), batch_size):
        chunk = documents[start : start + batch_size]
        vectors[start : start + len(chunk)] = check_vectors(
            embedder.encode([d.full_text for d in chunk], prompt=embedder.document_prompt, show_progress=False),
            len(chunk), embedder.dim,
        )
        if on_progress is not None:
            on_progress(len(chunk))
    return vectors


def check_vectors(vectors: np.ndarray, n: int, dim: int) -> np.ndarray:
    """``vectors`` as float32 (n, dim) if every row is finite with L2 norm 1 ± 1e-3, else ValueError."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.shape != (n, dim):
        raise ValueError(f"embedder returned shape {matrix.shape}, expected {(n, dim)}")
    norms = np.linalg.norm(matrix, axis=1)
    if not np.all(np.isfinite(norms)) or np.any(np.abs(norms - 1.0) > NORM_TOLERANCE):
        raise ValueError("embedder returned vectors that are not finite unit vectors (L2-normalised)")
    return matrix


def check_new_documents(documents: Sequence[Document], existing: Iterable[str] = ()) -> None:
    """Refuse duplicate ids (within ``documents`` or against ``existing``) and empty texts."""
    seen = set(existing)
    for doc in documents:
        if doc.id in seen:
            raise ValueError(f"document id {doc.id!r} is already in the index (or repeated in this batch)")
        if not doc.id or any(c.isspace() for c in doc.id):
            raise ValueError(f"document id {doc.id!r} is empty or contains whitespace")
        if not doc.text.strip():
            raise ValueError(f"document {doc.id!r} has an empty text")
        seen.add(doc.id)


def embedder_record(embedder: Embedder) -> dict[str, Any]:
    """What a manifest records of the embedder: ``model_id``, ``dim`` and the ``prompts`` its documents
    were embedded after (``document``) and its queries are to be (``query``)."""
    return {"model_id": embedder.model_id, "dim": embedder.dim,
            "prompts": {"query": embedder.query_prompt, "document": embedder.document_prompt}}


def built_prompts(manifest: dict[str, Any]) -> dict[str, str]:
    """The ``query`` and ``document`` prompts an index was built with (none before they were recorded)."""
    return manifest["embedder"].get("prompts", {"query": "", "document": ""})


def build_header(
    embedder: dict[str, Any], dense: DenseSettings, bm25: Bm25Settings | None, count: int, seconds: float,
    origin: str, skipped_empty: int,
) -> dict[str, Any]:
    """A manifest's header; ``embedder`` is :func:`embedder_record`'s (or an earlier manifest's) record."""
    return {
        "embedder": embedder,
        "dense": {**asdict(dense), "metric": "inner_product"},
        "bm25": None if bm25 is None else bm25.to_json(),
        "count": count,
        "skipped_empty": skipped_empty,
        "origin": origin,
        "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "build_seconds": round(seconds, 3),
    }


def build_index(
    path: str | Path,
    documents: Sequence[Document],
    embedder: Embedder,
    *,
    dense: DenseSettings = DenseSettings(),
    bm25: Bm25Settings | None = Bm25Settings(),
    batch_size: int = 256,
    on_progress: ProgressCallback | None = None,
    overwrite: bool = False,
    skipped_empty: int = 0,
    shard: ShardFacts | None = None,
    vectors: np.ndarray | None = None,
) -> dict[str, Any]:
    """Embed ``documents``, build the FAISS (and BM25) index and write it as the live generation of
    ``path``; returns the manifest. A previous index at ``path`` stays live until the very end.

    ``vectors``: the documents' vectors (row i for ``documents[i]``) when the caller embedded them
    already; a sharded build embeds the whole corpus in one pass so that every vector equals the
    unsharded build's bit for bit (a vector depends, by float rounding, on the batch it was
    embedded in).

    ``skipped_empty`` is the number of empty corpus documents the caller left out; the manifest
    records it (``skipped_empty``) and compaction carries it over.

    ``shard``: build one shard of a sharded index (``retrieval.shards.build``): BM25 scored with the whole
    corpus' statistics, each document recorded with its corpus-wide insertion number ``seq``."""
    root = Path(path)
    if not documents:
        raise ValueError("no documents to index")
    check_new_documents(documents)
    check_target(root, overwrite)
    make_dirs(root)
    lock = WriterLock(root / LOCK)
    try:
        check_target(root, overwrite)  # re-check under the lock
        started = time.perf_counter()
        if vectors is None:
            vectors = embed_documents(embedder, documents, batch_size=batch_size, on_progress=on_progress)
        else:
            vectors = check_vectors(vectors, len(documents), embedder.dim)
        dense_index = DenseIndex.build(vectors, dense)
        slots = np.arange(len(documents))
        stats = None if shard is None else shard.bm25_stats
        bm25_index = None if bm25 is None else Bm25Index.build([d.full_text for d in documents], slots, bm25, stats)
        header = build_header(
            embedder_record(embedder), dense, bm25, len(documents), time.perf_counter() - started, "build", skipped_empty,
        )
        if shard is not None:
            header["shard"] = shard.header()
        name = write_generation(root, documents, vectors, dense_index, bm25_index, header,
                                 None if shard is None else shard.seqs)
    finally:
        lock.release()
    return json.loads((root / name / MANIFEST).read_text(encoding="ascii"))


@dataclass(frozen=True)
class ShardFacts:
    """What a shard's build records: its number, the shard count, its documents' ``seqs`` and the
    corpus-wide BM25 statistics its BM25 index is scored with (None without BM25)."""

    index: int
    of: int
    seqs: Sequence[int]
    bm25_stats: Bm25Stats | None

    def header(self) -> dict[str, Any]:
        digest = None if self.bm25_stats is None else self.bm25_stats.digest()
        return {"index": self.index, "of": self.of, "bm25_stats": digest}



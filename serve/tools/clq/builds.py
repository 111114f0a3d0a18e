"""Shared work of a sweep: corpus embeddings once per embedder, one index per embedder × dimension × ANN.

Corpus vectors are cached as ``.npy`` keyed by the documents' text and the embedder's id; index
builds reuse them through :class:`CachedEmbedder`, so a PCA or HNSW variant never re-embeds.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.dense import DenseSettings
from steadyrank.retrieval.fsio import atomic_write_bytes
from steadyrank.retrieval.protocols import Embedder
from steadyrank.retrieval.store import IndexStore, build_index, embed_documents


class CachedEmbedder:
    """The real embedder, with corpus vectors (embedded after its document prompt) served from a
    cache (same ``model_id``/``dim``/prompts)."""

    def __init__(self, embedder: Embedder, texts: list[str], vectors: np.ndarray) -> None:
        self.model_id = embedder.model_id
        self.dim = embedder.dim
        self.query_prompt = embedder.query_prompt
        self.document_prompt = embedder.document_prompt
        self._embedder = embedder
        self._rows = {t: i for i, t in enumerate(texts)}
        self._vectors = vectors

    def encode(self, texts: list[str], *, prompt: str = "", show_progress: bool = False) -> np.ndarray:
        if prompt == self.document_prompt and all(t in self._rows for t in texts):
            return self._vectors[[self._rows[t] for t in texts]]
        return self._embedder.encode(texts, prompt=prompt, show_progress=show_progress)


def corpus_digest(documents: Sequence[Document], model_id: str, document_prompt: str = "", variant: str = "") -> str:
    """16 hex digits of SHA-256 over the embedder id, its document prompt (when it has one), the
    embedder ``variant`` (when given: the served settings it runs under) and every document's id and full text."""
    digest = hashlib.sha256(model_id.encode() + (f"\0prompt\0{document_prompt}".encode() if document_prompt else b"")
                            + (f"\0variant\0{variant}".encode() if variant else b""))
    for d in documents:
        digest.update(f"\0{d.id}\0{d.full_text}".encode())
    return digest.hexdigest()[:16]


def cached_corpus_vectors(documents: Sequence[Document], embedder: Embedder, cache: Path,
                          variant: str = "") -> tuple[np.ndarray, float]:
    """``(vectors, seconds)``: corpus embeddings computed once per (documents, embedder, ``variant``:
    see :func:`corpus_digest`) and cached.

    ``seconds`` is the wall time of the embedding when it ran (recorded beside the cache file).
    """
    key = corpus_digest(documents, embedder.model_id, embedder.document_prompt, variant)
    path, meta = cache / f"embeddings-{key}.npy", cache / f"embeddings-{key}.json"
    if path.exists() and meta.exists():
        return np.load(path), float(json.loads(meta.read_text(encoding="utf-8"))["seconds"])
    started = time.perf_counter()
    with tqdm(total=len(documents), desc=f"embedding corpus ({embedder.model_id})", unit="doc", file=sys.stderr) as bar:
        vectors = embed_documents(embedder, documents, on_progress=bar.update)
    seconds = time.perf_counter() - started
    cache.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    np.save(buffer, vectors)
    atomic_write_bytes(path, buffer.getvalue())
    atomic_write_bytes(meta, json.dumps({"seconds": seconds, "model_id": embedder.model_id}).encode())
    return vectors, seconds


def open_or_build(path: Path, documents: Sequence[Document], embedder: CachedEmbedder, dense: DenseSettings) -> IndexStore:
    """The index at ``path`` (verified on open), built first when missing or unreadable."""
    try:
        return IndexStore.open(path, embedder)
    except (ValueError, FileNotFoundError, OSError):
        build_index(path, documents, embedder, dense=dense, overwrite=True)
        return IndexStore.open(path, embedder)


def index_bytes(manifest: dict[str, Any], first_stage: str) -> int:
    """Bytes of the structures a first stage searches: ``dense.faiss`` and/or the ``bm25/`` files."""
    files = manifest["files"]
    dense = sum(f["bytes"] for name, f in files.items() if name == "dense.faiss")
    sparse = sum(f["bytes"] for name, f in files.items() if name.startswith("bm25/"))
    return {"dense": dense, "bm25": sparse, "hybrid": dense + sparse}[first_stage]

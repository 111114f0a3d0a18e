"""The on-disk format of an index directory and its generations: one directory holding a FAISS index,
a BM25 index, the documents and a manifest, updated by copy-on-write generations and a write-ahead log.

Layout of an index directory ``DIR``::

    DIR/CURRENT              "gen-000002 <sha256 of its manifest.json>\\n" — the live generation
    DIR/LOCK                 flock held by the one writer (pid inside, informational)
    DIR/gen-000002/
        manifest.json        format, embedder {model_id, dim}, dense settings (factory…), bm25
                             settings or null, count, built_at, build_seconds, files {name: sha256, bytes}
        dense.faiss          FAISS index; its ids are slots 0…count−1 (line order of docs.jsonl)
        embeddings.npy       float32 (count, dim) unit vectors, kept for compaction and re-training
        docs.jsonl           {"id", "title", "text", "metadata"} per slot
        bm25/                bm25s index and tokenizer vocabulary (absent with bm25 = null)
        wal.jsonl            write-ahead log of adds/deletes since this generation (see ``wal.py``)

Crash safety. A build or a compaction writes a complete generation into ``DIR/.tmp-*``, fsyncs it,
renames it to ``DIR/gen-N`` and then atomically replaces ``CURRENT``: until that replace the old
generation is live and untouched, after it the new one is complete. Adds and deletes are appended
to the live generation's ``wal.jsonl`` and fsynced before they are applied or acknowledged; loading
replays the log. Loading verifies the manifest against ``CURRENT`` and every file against the
manifest's SHA-256, and refuses an embedder whose ``model_id`` or ``dim`` differ from the manifest.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from steadyrank.retrieval.bm25 import Bm25Index
from steadyrank.retrieval.corpus import Document
from steadyrank.retrieval.dense import DenseIndex
from steadyrank.retrieval.fsio import atomic_write_bytes, fsync_dir, fsync_tree, sha256_bytes, sha256_file
from steadyrank.retrieval.layout import CURRENT

FORMAT = "steadyrank-index"
FORMAT_VERSION = 1
LOCK = "LOCK"
MANIFEST = "manifest.json"
WAL = "wal.jsonl"
GENERATION_PREFIX = "gen-"
TMP_PREFIX = ".tmp-"


class IndexIntegrityError(ValueError):
    """The index directory fails verification (checksum, size, format); rebuild it."""


# ----------------------------------------------------------------------------------------------
# Records: documents and vectors in docs.jsonl and the write-ahead log


def encode_vectors(vectors: np.ndarray) -> dict[str, Any]:
    data = np.ascontiguousarray(vectors, dtype="<f4")
    return {"vectors": base64.b64encode(data.tobytes()).decode("ascii"), "shape": list(data.shape)}


def decode_vectors(record: dict[str, Any]) -> np.ndarray:
    shape = tuple(int(n) for n in record["shape"])
    return np.reshape(np.frombuffer(base64.b64decode(record["vectors"]), dtype="<f4"), shape).astype(np.float32)


def doc_record(doc: Document, seq: int | None) -> dict[str, Any]:
    """A ``docs.jsonl``/WAL record; a shard's records also carry the document's ``seq``."""
    return doc.to_json() if seq is None else {**doc.to_json(), "seq": seq}


def document_from_record(record: dict[str, Any]) -> Document:
    return Document(id=record["id"], text=record["text"], title=record["title"], metadata=record["metadata"])



# ----------------------------------------------------------------------------------------------
# Generations


def generation_numbers(root: Path) -> list[int]:
    numbers: list[int] = []
    for entry in root.iterdir():
        if entry.name.startswith(GENERATION_PREFIX) and entry.name[len(GENERATION_PREFIX) :].isdigit():
            numbers.append(int(entry.name[len(GENERATION_PREFIX) :]))
    return numbers


def read_current(root: Path) -> tuple[str, str]:
    """``(generation directory name, manifest sha256)`` from ``CURRENT``."""
    pointer = root / CURRENT
    if not pointer.is_file():
        raise FileNotFoundError(f"{root} holds no steadyrank index (no {CURRENT} file; was its build interrupted?)")
    parts = pointer.read_text(encoding="ascii").split()
    if len(parts) != 2 or not parts[0].startswith(GENERATION_PREFIX):
        raise IndexIntegrityError(f"{pointer} is malformed: {pointer.read_text(errors='replace')!r}")
    return parts[0], parts[1]


def check_target(root: Path, overwrite: bool) -> None:
    """Refuse to build into a non-index directory, or over an index without ``overwrite``."""
    if root.exists() and not root.is_dir():
        raise ValueError(f"{root} exists and is not a directory")
    if not root.exists():
        return
    foreign = [
        e.name for e in root.iterdir()
        if e.name not in (CURRENT, LOCK) and not e.name.startswith((GENERATION_PREFIX, TMP_PREFIX, f".{CURRENT}."))
    ]
    if foreign:
        raise ValueError(f"{root} exists and is not a steadyrank index (it holds {sorted(foreign)[:3]}…)")
    if (root / CURRENT).exists() and not overwrite:
        raise ValueError(f"{root} already holds an index; pass overwrite (--overwrite) to replace it")


def remove_stale(root: Path, keep: str) -> None:
    """Delete every generation but ``keep`` and every leftover temporary directory (writer only)."""
    for entry in root.iterdir():
        if entry.is_dir() and entry.name != keep and entry.name.startswith((GENERATION_PREFIX, TMP_PREFIX)):
            shutil.rmtree(entry, ignore_errors=True)


def write_generation(
    root: Path,
    documents: Sequence[Document],
    vectors: np.ndarray,
    dense: DenseIndex,
    bm25: Bm25Index | None,
    header: dict[str, Any],
    seqs: Sequence[int] | None = None,
) -> str:
    """Write a complete generation next to the live one and make it live; returns its name.

    Order: files → fsync → rename ``.tmp-*`` to ``gen-N`` → fsync ``root`` → replace ``CURRENT``.
    A crash before the replace leaves the previous generation live; after it, the new one.
    """
    number = max(generation_numbers(root), default=0) + 1
    tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=root))
    dense.write(tmp / "dense.faiss")
    np.save(tmp / "embeddings.npy", np.ascontiguousarray(vectors, dtype=np.float32))
    with open(tmp / "docs.jsonl", "w", encoding="ascii") as handle:
        for i, doc in enumerate(documents):
            handle.write(json.dumps(doc_record(doc, None if seqs is None else int(seqs[i]))) + "\n")
    if bm25 is not None:
        bm25.save(tmp / "bm25")
    files = {
        path.relative_to(tmp).as_posix(): {"sha256": sha256_file(path), "bytes": path.stat().st_size}
        for path in sorted(tmp.rglob("*"))
        if path.is_file()
    }
    manifest = {**header, "format": FORMAT, "format_version": FORMAT_VERSION, "generation": number, "files": files}
    manifest_bytes = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("ascii")
    (tmp / MANIFEST).write_bytes(manifest_bytes)
    fsync_tree(tmp)
    name = f"{GENERATION_PREFIX}{number:06d}"
    os.rename(tmp, root / name)
    fsync_dir(root)
    atomic_write_bytes(root / CURRENT, f"{name} {sha256_bytes(manifest_bytes)}\n".encode("ascii"))
    remove_stale(root, keep=name)
    return name


def verify_generation(root: Path, gen: Path, digest: str) -> dict[str, Any]:
    """The manifest of generation ``gen``, verified: its SHA-256 against ``digest`` (from
    ``CURRENT``), its format, and every file it lists against its size and SHA-256."""
    manifest_bytes = (gen / MANIFEST).read_bytes()
    if sha256_bytes(manifest_bytes) != digest:
        raise IndexIntegrityError(f"{gen / MANIFEST}: checksum does not match {root / CURRENT}; rebuild the index")
    manifest: dict[str, Any] = json.loads(manifest_bytes)
    if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
        raise IndexIntegrityError(
            f"{gen}: unsupported index format {manifest.get('format')!r} v{manifest.get('format_version')!r}"
        )
    for relative, expected in manifest["files"].items():
        path = gen / relative
        if not path.is_file():
            raise IndexIntegrityError(f"{path}: missing (listed in the manifest); rebuild the index")
        size = path.stat().st_size
        if size != expected["bytes"] or sha256_file(path) != expected["sha256"]:
            raise IndexIntegrityError(
                f"{path}: checksum mismatch ({size} bytes, manifest says {expected['bytes']}); "
                "the index is corrupt: rebuild it"
            )
    return manifest

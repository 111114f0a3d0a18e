"""The embedded default and the index cache.

With no settings, the server indexes the demo corpus shipped in ``serve/data/demo/`` (Linux
administration passages) with the bundled all-MiniLM-L6-v2 on first start and caches the index
under ``<cache>/index-<key>`` (``$STEADYRANK_CACHE`` or ``~/.cache/steadyrank``), where the key hashes
the corpus bytes, the embedder and the index settings: a changed corpus or embedder gets a new
index, an unchanged one is reused. A user corpus (``index.corpus``) without ``index.path`` is cached
the same way; with ``index.path`` the index is built there if missing.

Builds are serialised by an ``flock`` on ``<index dir>.build.lock``: several replicas (or a
``steadyrank serve`` pre-build and a replica) starting together build once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from steadyrank.retrieval.layout import holds_index
from steadyrank.serve.runtime.precision import precision_on_this_machine
from steadyrank.serve.runtime.settings import ModelSettings
from steadyrank.serve.settings import Settings

if TYPE_CHECKING:
    from steadyrank.serve.runtime.inspection import EmbedderIdentity

logger = logging.getLogger("steadyrank.app")

DEMO_DIR = Path(__file__).resolve().parent.parent / "data" / "demo"
DEMO_CORPUS = DEMO_DIR / "corpus.jsonl"


def corpus_path(settings: Settings) -> Path | None:
    """The corpus to index when the index is missing (the demo corpus by default); None with a
    user ``index.path`` and no corpus."""
    if settings.index.corpus is not None:
        return Path(settings.index.corpus).expanduser()
    if settings.index.path is None:
        return DEMO_CORPUS
    return None


def embedder_identity(model: ModelSettings) -> EmbedderIdentity:
    """A bi-encoder's served id, dimension and prompts from its files, without loading its weights."""
    from steadyrank.serve.runtime.inspection import EmbedderIdentity, inspect_model

    return EmbedderIdentity.of(inspect_model(model))


def _corpus_digest(path: Path) -> str:
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if file.is_dir():
            continue
        digest.update(file.name.encode())
        with open(file, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def index_dir(settings: Settings) -> Path:
    """Where the Retriever's index lives (``index.path``, or the cache directory for its key)."""
    if settings.index.path is not None:
        return Path(settings.index.path).expanduser()
    corpus = corpus_path(settings)
    assert corpus is not None
    embedder = embedder_identity(settings.embedder)
    index = settings.index
    key = json.dumps(
        {
            "corpus": _corpus_digest(corpus),
            "embedder": [embedder.model_id, embedder.dim, precision_on_this_machine(settings.embedder), settings.embedder.scoring,
                         settings.embedder.max_length, str(settings.embedder.model_path().resolve()),
                         *([embedder.query_prompt, embedder.document_prompt]
                           if embedder.query_prompt or embedder.document_prompt else [])],
            "dense": [index.factory, index.ef_construction, index.ef_search, index.nprobe],
            "bm25": index.bm25,
            **({"shards": index.shards} if index.shards > 1 else {}),
        },
        sort_keys=True,
    )
    name = "demo" if corpus == DEMO_CORPUS else "corpus"
    return settings.cache_path() / f"index-{name}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def index_exists(settings: Settings) -> bool:
    """Whether :func:`ensure_index` would find an index (and build nothing)."""
    return holds_index(index_dir(settings))


def ensure_index(settings: Settings, on_progress: Callable[[int, int], None] | None = None) -> Path:
    """The index directory, built first if it holds no index yet; returns its path.

    ``on_progress(done, total)`` reports embedded documents during a build.
    """
    path = index_dir(settings)
    if holds_index(path):
        return path
    corpus = corpus_path(settings)
    if corpus is None:
        raise FileNotFoundError(
            f"index.path: no index at {path} (build one with `steadyrank index build`, or set index.corpus)"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_file = path.parent / f"{path.name}.build.lock"
    with open(lock_file, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if holds_index(path):  # another process built it while we waited
                return path
            _build(settings, corpus, path, on_progress)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return path


def _build(settings: Settings, corpus: Path, path: Path, on_progress: Callable[[int, int], None] | None) -> None:
    from steadyrank.retrieval.bm25 import Bm25Settings
    from steadyrank.retrieval.corpus import read_corpus
    from steadyrank.retrieval.dense import DenseSettings
    from steadyrank.retrieval.store import build_index
    from steadyrank.serve.runtime import load_embedder

    read = read_corpus(corpus, strict=False)  # the one empty-document rule: skipped, counted, named
    if read.warning():
        logger.warning("%s", read.warning())
    documents = read.documents
    logger.info("building the index of %s (%d documents) at %s", corpus, len(documents), path)
    embedder = load_embedder(settings.embedder)
    index = settings.index
    done = 0

    def progress(n: int) -> None:
        nonlocal done
        done += n
        if on_progress is not None:
            on_progress(done, len(documents))

    options = {
        "dense": DenseSettings(factory=index.factory, ef_construction=index.ef_construction,
                               ef_search=index.ef_search, nprobe=index.nprobe),
        "bm25": Bm25Settings() if index.bm25 else None,
        "on_progress": progress,
        "skipped_empty": len(read.skipped_empty),
    }
    if index.shards > 1:
        from steadyrank.retrieval.shards import build_sharded_index

        build_sharded_index(path, documents, embedder, shards=index.shards, **options)
    else:
        build_index(path, documents, embedder, **options)

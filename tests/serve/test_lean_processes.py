"""Processes that hold no model load no model framework.

The ``steadyrank serve`` driver, the Ingress, Searcher and MetricsHub replicas only read model
*files* (ids, dimensions, tokenizers) and the Retriever only searches the index: none of them may
import torch or transformers (each costs ~200 MB of memory per process); only the Retriever may
load FAISS and bm25s. Each check runs in a fresh interpreter, so ``sys.modules`` shows exactly what
that code path imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from steadyrank.retrieval.store import build_index
from steadyrank.serve.runtime import ModelSettings
from steadyrank.serve.server.default import embedder_identity
from tests.retrieval.helpers import REPO, HashEmbedder, synthetic_documents

pytestmark = pytest.mark.e2e  # each check runs in a fresh interpreter

MODEL_FRAMEWORKS = ("torch", "transformers", "sentence_transformers")
INDEX_LIBRARIES = ("faiss", "bm25s", "numba")


def _loaded_after(code: str, settings: dict) -> set[str]:
    """Top-level packages among MODEL_FRAMEWORKS + INDEX_LIBRARIES that ``code`` (run with
    ``settings`` bound to the resolved settings) imported."""
    program = (
        "import json, sys\n"
        "from steadyrank.serve.server.hosting.builder import resolve_settings\n"
        f"settings = resolve_settings(json.loads({json.dumps(json.dumps(settings))}))\n"
        f"{code}\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(MODEL_FRAMEWORKS + INDEX_LIBRARIES)!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _settings(tmp_path: Path, reranker: Path) -> dict:
    """Settings over an index built with a stand-in embedder that carries the bundled MiniLM's
    identity (the index is real FAISS + BM25; only its vectors come from feature hashing)."""
    bundled = embedder_identity(ModelSettings())
    index = tmp_path / "index"
    build_index(index, synthetic_documents(40), HashEmbedder(dim=bundled.dim, model_id=bundled.model_id))
    return {"cache_dir": str(tmp_path / "cache"), "reranker": {"path": str(reranker)},
            "index": {"path": str(index)}, "quality": {"enabled": False}}


def test_driver_and_front_replicas_load_no_model_framework(tmp_path, tiny_cross_encoder_dir):
    settings = _settings(tmp_path, tiny_cross_encoder_dir)
    driver = (  # what `steadyrank serve` does before and while it deploys
        "from steadyrank.serve.server.default import ensure_index, index_exists\n"
        "from steadyrank.serve.app import build_app\n"
        "assert index_exists(settings)\n"
        "ensure_index(settings)\n"
        "build_app({'settings': settings})\n"
    )
    assert _loaded_after(driver, settings) == set()
    front = (  # what the Ingress and Searcher replicas build from the settings
        "from steadyrank.serve.server.http.dialects.documents import TokenCutter\n"
        "from steadyrank.serve.server.http.dialects.names import ServedNames\n"
        "from steadyrank.serve.server.components.searcher import Searcher\n"
        "from steadyrank.serve.server.components.metrics_hub import MetricsHub\n"
        "import steadyrank.serve.server.hosting.ingress\n"
        "names = ServedNames.from_settings(settings)\n"
        "assert names.embedder[0] == 'sentence-transformers/all-MiniLM-L6-v2', names\n"
        "cutter = TokenCutter(settings.reranker_model)\n"
        "assert cutter.cut(['one two three four'], 2)[1] == [0], cutter.cut(['one two three four'], 2)\n"
    )
    assert _loaded_after(front, settings) == set()


def test_retriever_loads_the_index_but_no_model_framework(tmp_path, tiny_cross_encoder_dir):
    settings = _settings(tmp_path, tiny_cross_encoder_dir)
    retriever = (
        "from steadyrank.serve.server.components.retriever import Retriever\n"
        "r = Retriever(settings)\n"
        "pool = r._search('the river protects winter storms', None, 'bm25', 5, False)\n"
        "assert len(pool.doc_ids) == 5, pool\n"
    )
    loaded = _loaded_after(retriever, settings)
    assert not loaded & set(MODEL_FRAMEWORKS), loaded
    assert {"faiss", "bm25s"} <= loaded

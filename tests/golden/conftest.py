"""Fixtures: the embedded demo corpus indexed with the hashing embedder, a few demo queries, and the
stand-in LLM judge (see ``llm_standin.py``: no LLM runs on the test machines)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from steadyrank.retrieval.corpus import read_documents
from steadyrank.retrieval.store import build_index
from tests.retrieval.helpers import HashEmbedder

DEMO = Path(__file__).resolve().parents[2] / "serve" / "data" / "demo"


@pytest.fixture(scope="session")
def demo_index(tmp_path_factory) -> Path:
    """The 300-passage demo corpus as a real FAISS + BM25 index (hashing embedder, built in-process)."""
    path = tmp_path_factory.mktemp("golden-index") / "demo"
    build_index(path, read_documents(DEMO), HashEmbedder())
    return path


@pytest.fixture(scope="session")
def demo_queries(tmp_path_factory) -> Path:
    """The first three demo queries."""
    path = tmp_path_factory.mktemp("golden-queries") / "queries.jsonl"
    lines = (DEMO / "queries.jsonl").read_text(encoding="utf-8").splitlines()[:3]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def build_args(index: Path, queries: Path, out: Path, judge: Path) -> list[str]:
    """A small, fully specified ``golden build`` (BM25 pool, so no embedder is loaded)."""
    return ["golden", "build", "--index", str(index), "--queries", str(queries), "--out", str(out),
            "--judge", str(judge), "--retrievers", "bm25", "--depth", "8", "--negatives", "2", "--max-pool", "8",
            "--top-k", "5", "--max-calls", "6", "--stable-rounds", "3", "--json"]


def output_files(root: Path) -> dict[str, bytes]:
    """Every output file of a build (not its state) by relative path."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".state" not in p.parts}


def first_json(text: str) -> dict:
    return json.loads(text[text.index("{"):])

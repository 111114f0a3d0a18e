"""Test support: a small deterministic embedder, a synthetic corpus, and the subprocess runner.

``HashEmbedder`` is a real (if weak) bi-encoder satisfying ``retrieval.protocols.Embedder``:
feature hashing of lower-cased word unigrams into ``dim`` signed buckets, then L2 normalisation.
It lets durability tests build indexes of thousands of documents in a subprocess in well under a
second of embedding time; quality tests use the real MiniLM embedder instead.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from steadyrank.retrieval.corpus import Document

REPO = Path(__file__).resolve().parents[2]

SUBJECTS = [
    "the river", "a glacier", "the central bank", "an old lighthouse", "the vaccine", "a solar panel",
    "the orchestra", "a migrating bird", "the compiler", "a coral reef", "the senate", "a volcano",
    "the bakery", "a satellite", "the marathon runner", "a honeybee colony", "the database", "a desert fox",
]
VERBS = [
    "slowly changes", "protects", "measures", "absorbs", "celebrates", "depends on", "releases",
    "warns about", "reshapes", "feeds", "records", "competes with", "repairs", "illuminates",
]
OBJECTS = [
    "interest rates", "winter storms", "ancient pottery", "ocean temperature", "city traffic",
    "wheat harvests", "memory leaks", "mountain trails", "antibiotic resistance", "tax policy",
    "electric cars", "medieval castles", "rainforest soil", "jazz improvisation", "earthquake risk",
    "children's books", "copper prices", "night skies",
]
PLACES = [
    "in northern Norway", "near the equator", "during the 1990s", "after the flood", "in small towns",
    "across Europe", "on Mars", "under heavy rain", "in the laboratory", "along the coast",
]


def synthetic_documents(n: int, seed: int = 7, prefix: str = "d") -> list[Document]:
    """``n`` distinct, reproducible two-sentence documents built from a small grammar."""
    rng = random.Random(seed)
    documents = []
    for i in range(n):
        first = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(PLACES)}."
        second = f"Report {i}: {rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}."
        documents.append(Document(id=f"{prefix}{i}", text=f"{first.capitalize()} {second}", title=""))
    return documents


class HashEmbedder:
    """Signed feature hashing of words into ``dim`` buckets, L2-normalised (float32); a prompt's words
    count as the text's."""

    def __init__(self, dim: int = 64, model_id: str = "test/hash-embedder-v1", query_prompt: str = "",
                 document_prompt: str = "") -> None:
        self.dim = dim
        self.model_id = model_id
        self.query_prompt = query_prompt
        self.document_prompt = document_prompt

    def encode(self, texts: list[str], *, prompt: str = "", show_progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", (prompt + text).lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self.dim
                out[row, bucket] += 1.0 if digest[4] & 1 else -1.0
            norm = np.linalg.norm(out[row])
            if norm == 0:
                out[row, 0], norm = 1.0, 1.0
            out[row] /= norm
        return out


def write_corpus(path: Path, documents: list[Document]) -> Path:
    """Write ``documents`` as a BEIR-style ``corpus.jsonl``."""
    with path.open("w", encoding="utf-8") as handle:
        for doc in documents:
            handle.write(json.dumps({"_id": doc.id, "title": doc.title, "text": doc.text}) + "\n")
    return path


def start_python(code: str) -> subprocess.Popen[str]:
    """Run ``code`` in a fresh interpreter (repository root on the path), stdout piped line by line."""
    return subprocess.Popen(
        [sys.executable, "-u", "-c", code],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

"""Sparse retrieval: BM25 with bm25s, tokenizer and stemmer configurable.

Score (``method="lucene"``, the default): for query terms t present in document d,
``Σ_t idf(t) · tf(t,d) · (k1 + 1) / (tf(t,d) + k1 · (1 − b + b · |d| / avgdl))`` with
``idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))``; other bm25s variants via ``method``.
Documents sharing no term with the query score 0 and are never returned. Equal scores are ordered
by slot ascending (insertion order), so results are deterministic.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import Stemmer
from bm25s.tokenization import Tokenizer

BM25_METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")


@dataclass(frozen=True)
class Bm25Settings:
    """How text becomes terms and terms become scores (recorded in the manifest).

    ``stemmer``: a PyStemmer algorithm (``"english"``, ``"porter"``, ``"french"``, …) or None.
    ``stopwords``: a bm25s stopword list (``"en"``, ``"fr"``, …) or None to keep every term.
    ``token_pattern``: regular expression whose matches are the terms (after lower-casing if ``lower``).
    """

    k1: float = 1.5
    b: float = 0.75
    method: str = "lucene"
    stemmer: str | None = "english"
    stopwords: str | None = "en"
    lower: bool = True
    token_pattern: str = r"(?u)\b\w\w+\b"

    def __post_init__(self) -> None:
        if self.method not in BM25_METHODS:
            raise ValueError(f"unknown BM25 method {self.method!r}; choose one of {', '.join(BM25_METHODS)}")
        if self.stemmer is not None and self.stemmer not in Stemmer.algorithms():
            raise ValueError(f"unknown stemmer {self.stemmer!r}; PyStemmer has {', '.join(Stemmer.algorithms())}")

    def to_json(self) -> dict[str, Any]:
        """Plain dict for the manifest."""
        return asdict(self)

    def tokenizer(self) -> Tokenizer:
        """A fresh bm25s tokenizer with these settings (empty vocabulary)."""
        stem = Stemmer.Stemmer(self.stemmer).stemWord if self.stemmer else None
        return Tokenizer(lower=self.lower, splitter=self.token_pattern, stopwords=self.stopwords or [], stemmer=stem)


class Bm25Index:
    """A bm25s index over some slots: row ``i`` of the index is slot ``slots[i]`` of the store."""

    def __init__(self, retriever: bm25s.BM25 | None, tokenizer: Tokenizer, slots: np.ndarray) -> None:
        self._retriever = retriever
        self._tokenizer = tokenizer
        self.slots = slots

    @classmethod
    def build(cls, texts: list[str], slots: np.ndarray, settings: Bm25Settings) -> Bm25Index:
        """Tokenise and index ``texts`` (``texts[i]`` is slot ``slots[i]``)."""
        tokenizer = settings.tokenizer()
        if not texts:
            return cls(None, tokenizer, np.zeros(0, dtype=np.int64))
        tokens = tokenizer.tokenize(texts, return_as="tuple", show_progress=False)
        retriever = bm25s.BM25(k1=settings.k1, b=settings.b, method=settings.method)
        retriever.index(tokens, show_progress=False)
        return cls(retriever, tokenizer, np.asarray(slots, dtype=np.int64))

    def save(self, directory: Path) -> None:
        """Write the index and the tokenizer vocabulary into ``directory`` (rows = slots 0…n−1)."""
        if self._retriever is None or not np.array_equal(self.slots, np.arange(self.slots.size)):
            raise ValueError("only an index over slots 0…n−1 of a compacted store can be saved")
        directory.mkdir(parents=True, exist_ok=True)
        self._retriever.save(str(directory), show_progress=False)
        self._tokenizer.save_vocab(str(directory))

    @classmethod
    def load(cls, directory: Path, settings: Bm25Settings) -> Bm25Index:
        """Read an index written by :meth:`save`."""
        retriever = bm25s.BM25.load(str(directory), show_progress=False)
        tokenizer = settings.tokenizer()
        tokenizer.load_vocab(str(directory))
        n = int(retriever.scores["num_docs"])
        return cls(retriever, tokenizer, np.arange(n, dtype=np.int64))

    def search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` documents with a positive score: ``(scores float32 (m,), slots int64 (m,))``, m ≤ k."""
        if self._retriever is None or k <= 0:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
        ids = self._tokenizer.tokenize([query], update_vocab=False, return_as="ids", show_progress=False)[0]
        scores = np.asarray(self._retriever.get_scores(ids), dtype=np.float32)
        positive = int(np.count_nonzero(scores > 0))
        k = min(k, positive)
        if k == 0:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
        threshold = scores[np.argpartition(-scores, k - 1)[:k]].min()
        rows = np.flatnonzero(scores >= threshold)  # every tie at the k-th score, then cut by slot
        rows = rows[np.lexsort((self.slots[rows], -scores[rows]))][:k]
        return scores[rows], self.slots[rows]

"""Reranker scores cached per (reranker regime, query, document), shared by every configuration.

A pointwise reranker gives a (query, document) pair the same score whatever list it arrives in, so
configurations whose candidate lists overlap share their scores: each pair is scored once per
regime. The cache is a JSON file replaced atomically after every query (a killed sweep keeps what
it scored). Token counts come from the reranker's own tokenizer: the (query, document) pair
truncated at ``max_length`` as the reranker sees it, and the document alone (a generator chunk).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from steadyrank.retrieval.fsio import atomic_write_bytes


def _key(query: str, document: str) -> str:
    return hashlib.sha256(f"{query}\0{document}".encode()).hexdigest()[:24]


def _doc_key(document: str) -> str:
    return hashlib.sha256(document.encode()).hexdigest()[:24]


@dataclass
class CachedScores:
    """``scores`` (φ of the logits), ``keys`` (FP32 rank keys), ``pair_tokens`` by pair key;
    ``doc_tokens`` by document key."""

    scores: dict[str, float]
    keys: dict[str, float]
    pair_tokens: dict[str, int]
    doc_tokens: dict[str, int]


class ScoreCache:
    """Scores and token counts of one reranker regime, filled by :meth:`fill`, read as a Reranker."""

    def __init__(self, scorer: Any, tokenizer: Any, path: Path) -> None:
        self.scorer = scorer
        self.tokenizer = tokenizer
        self.path = path
        self.max_length = int(scorer.settings.max_length)
        if path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
            self.data = CachedScores(data["scores"], data["keys"], data["pair_tokens"], data["doc_tokens"])
        else:
            self.data = CachedScores({}, {}, {}, {})
        self.scored_pairs = 0

    def missing(self, query: str, documents: Sequence[str]) -> list[str]:
        """The documents (deduplicated, in order) whose pair with ``query`` is not cached."""
        return list(dict.fromkeys(d for d in documents if _key(query, d) not in self.data.scores))

    def fill(self, query: str, documents: Sequence[str]) -> int:
        """Score the uncached pairs in one reranker call, count their tokens, persist; returns pairs scored."""
        todo = self.missing(query, documents)
        if not todo:
            return 0
        scored = self.scorer.score([(query, d) for d in todo])
        scores = np.asarray(scored.scores, dtype=np.float32)
        keys = np.asarray(scored.keys, dtype=np.float32)
        pairs = self.tokenizer([query] * len(todo), todo, truncation=True, max_length=self.max_length)["input_ids"]
        alone = self.tokenizer(todo, add_special_tokens=False)["input_ids"]
        for doc, score, rank_key, pair, ids in zip(todo, scores.tolist(), keys.tolist(), pairs, alone, strict=True):
            key = _key(query, doc)
            self.data.scores[key] = score
            self.data.keys[key] = rank_key
            self.data.pair_tokens[key] = len(pair)
            self.data.doc_tokens[_doc_key(doc)] = len(ids)
        self.scored_pairs += len(todo)
        atomic_write_bytes(self.path, json.dumps(self.data.__dict__).encode())
        return len(todo)

    @property
    def rescores_boundary_ties(self) -> bool:
        """As the cached regime's scorer: a tie straddling ``top_n`` is settled by :meth:`fp32_keys`."""
        return bool(self.scorer.rescores_boundary_ties)

    def score(self, pairs: Sequence[tuple[str, str]]) -> _Result:
        """The cached scores and rank keys (float32, input order) of ``pairs``; KeyError if one is missing."""
        keys = [_key(query, doc) for query, doc in pairs]
        return _Result(np.array([self.data.scores[k] for k in keys], dtype=np.float32),
                       np.array([self.data.keys[k] for k in keys], dtype=np.float32))

    def fp32_keys(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """FP32 rank keys for boundary re-scoring: the regime's scorer, uncached (rarely needed)."""
        return self.scorer.fp32_keys(pairs)

    def pair_tokens(self, query: str, documents: Sequence[str]) -> int:
        """Tokens the reranker reads for these pairs (sum)."""
        return sum(self.data.pair_tokens[_key(query, d)] for d in documents)

    def doc_tokens(self, documents: Sequence[str]) -> int:
        """Tokens of these documents alone (sum): what a generator prompt carries for them."""
        return sum(self.data.doc_tokens[_doc_key(d)] for d in documents)


@dataclass(frozen=True)
class _Result:
    scores: np.ndarray
    keys: np.ndarray

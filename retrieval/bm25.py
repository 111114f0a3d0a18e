"""Sparse retrieval: BM25 with bm25s, tokenizer and stemmer configurable.

Score (``method="lucene"``, the default): for query terms t present in document d,
``Σ_t idf(t) · tf(t,d) · (k1 + 1) / (tf(t,d) + k1 · (1 − b + b · |d| / avgdl))`` with
``idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))``; other bm25s variants via ``method``.
Documents sharing no term with the query score 0 and are never returned. Equal scores are ordered
by slot ascending (insertion order), so results are deterministic.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np

# bm25s, SciPy and PyStemmer ship no type stubs: they are imported as untyped modules (a dynamic
# boundary) and used only through the typed protocols and declarations below.
_bm25s: Any = importlib.import_module("bm25s")
_sparse: Any = importlib.import_module("scipy.sparse")
_stemmer: Any = importlib.import_module("Stemmer")
_scoring: Any = importlib.import_module("bm25s.scoring")
_tokenization: Any = importlib.import_module("bm25s.tokenization")

BM25_METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")


class Tokenized(Protocol):
    """bm25s's ``Tokenized`` named tuple: the token ids of each text and the vocabulary (term → id)."""

    @property
    def ids(self) -> list[list[int]]: ...

    @property
    def vocab(self) -> dict[str, int]: ...


class Tokenizer(Protocol):
    """The part of bm25s's ``Tokenizer`` used here."""

    def tokenize(self, texts: list[str], *, update_vocab: bool | str = ..., return_as: str = ...,
                 show_progress: bool = ...) -> object: ...

    def save_vocab(self, save_dir: str) -> object: ...

    def load_vocab(self, save_dir: str) -> object: ...


class _Retriever(Protocol):
    """The part of bm25s's ``BM25`` used here."""

    scores: dict[str, np.ndarray | int]  # the CSC arrays of the index and "num_docs"

    def index(self, corpus: Tokenized, *, show_progress: bool = ...) -> object: ...

    def save(self, save_dir: str, *, show_progress: bool = ...) -> object: ...

    def get_scores(self, query_tokens_single: list[int]) -> np.ndarray: ...


class _SparseColumns(Protocol):
    """A SciPy ``csc_matrix``'s arrays."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray


def _stemmer_algorithms() -> list[str]:
    """PyStemmer's algorithm names."""
    algorithms: list[str] = _stemmer.algorithms()
    return algorithms


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
        if self.stemmer is not None and self.stemmer not in _stemmer_algorithms():
            raise ValueError(f"unknown stemmer {self.stemmer!r}; PyStemmer has {', '.join(_stemmer_algorithms())}")

    def to_json(self) -> dict[str, Any]:
        """Plain dict for the manifest."""
        return asdict(self)

    def tokenizer(self) -> Tokenizer:
        """A fresh bm25s tokenizer with these settings (empty vocabulary)."""
        stem: Callable[[str], str] | None = _stemmer.Stemmer(self.stemmer).stemWord if self.stemmer else None
        tokenizer: Tokenizer = _tokenization.Tokenizer(lower=self.lower, splitter=self.token_pattern,
                                                       stopwords=self.stopwords or [], stemmer=stem)
        return tokenizer


@dataclass(frozen=True)
class Bm25Stats:
    """The corpus statistics BM25 scores depend on: ``n_docs`` (N), ``total_length`` (Σ|d|, terms
    after tokenisation) and ``doc_freqs`` (df per term). ``avgdl = total_length / n_docs``.

    A sharded index scores every shard with the statistics of the whole corpus (the sum of the
    shards' statistics), so that a document's BM25 score does not depend on which shard holds it.
    """

    n_docs: int
    total_length: int
    doc_freqs: dict[str, int]

    @classmethod
    def of_texts(cls, texts: Sequence[str], settings: Bm25Settings) -> Bm25Stats:
        """Statistics of ``texts`` tokenised with ``settings`` (as :meth:`Bm25Index.build` tokenises them)."""
        if not texts:
            return cls(0, 0, {})
        tokens = _tokenized(settings.tokenizer(), list(texts))
        terms = {i: term for term, i in tokens.vocab.items()}
        counts: Counter[int] = Counter()
        for ids in tokens.ids:
            counts.update(set(ids))
        return cls(len(tokens.ids), sum(len(ids) for ids in tokens.ids), {terms[i]: n for i, n in counts.items()})

    @classmethod
    def total(cls, parts: Iterable[Bm25Stats]) -> Bm25Stats:
        """The statistics of the union of disjoint corpora: every count summed."""
        n_docs = total_length = 0
        doc_freqs: Counter[str] = Counter()
        for part in parts:
            n_docs += part.n_docs
            total_length += part.total_length
            doc_freqs.update(part.doc_freqs)
        return cls(n_docs, total_length, dict(doc_freqs))

    @property
    def avg_length(self) -> np.float64:
        """avgdl as a NumPy float64, the type bm25s computes it in (its type steers NumPy's promotion)."""
        return np.float64(self.total_length) / self.n_docs if self.n_docs else np.float64(0.0)

    def to_json(self) -> dict[str, Any]:
        return {"n_docs": self.n_docs, "total_length": self.total_length, "doc_freqs": dict(sorted(self.doc_freqs.items()))}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Bm25Stats:
        return cls(int(data["n_docs"]), int(data["total_length"]), {str(k): int(v) for k, v in data["doc_freqs"].items()})

    def digest(self) -> str:
        """SHA-256 of the canonical JSON (identifies the statistics an index was scored with)."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode("utf-8")).hexdigest()


def _tokenized(tokenizer: Tokenizer, texts: list[str]) -> Tokenized:
    """``texts`` as token ids and the vocabulary (bm25s's ``return_as="tuple"``)."""
    tokens = tokenizer.tokenize(texts, return_as="tuple", show_progress=False)
    if not isinstance(tokens, _tokenization.Tokenized):
        raise TypeError(f"bm25s tokenize(return_as='tuple') returned {type(tokens).__name__}, not Tokenized")
    return cast(Tokenized, tokens)  # bm25s's Tokenized, checked just above


def term_ids(texts: list[str], settings: Bm25Settings) -> list[list[int]]:
    """Each text's terms under ``settings`` as ids of one shared vocabulary (equal terms, equal ids).
    A text without terms has none (bm25s stands an empty term ``""`` in for them; it is left out)."""
    tokens = _tokenized(settings.tokenizer(), texts)
    empty = tokens.vocab.get("")
    return [[i for i in ids if i != empty] for ids in tokens.ids]


class _CorpusStatsBM25(_bm25s.BM25):
    """bm25s's eager index, scored with given corpus statistics instead of those of the documents
    it holds (``build_index_from_ids`` is bm25s's documented override point). Per (term, document)
    the stored score is computed by bm25s's own ``scoring`` functions with global N, df and avgdl,
    so it is bit-for-bit the score an index over the whole corpus stores."""

    # set by bm25s.BM25.__init__ and build_index_from_ids (untyped), declared with the values they take there
    k1: float
    b: float
    delta: float
    method: str
    idf_method: str
    dtype: str
    int_dtype: str
    methods_requiring_nonoccurrence: tuple[str, ...]
    nonoccurrence_array: np.ndarray | None

    def __init__(self, stats: Bm25Stats, vocab: dict[str, int], **kwargs: Any) -> None:
        _bm25s.BM25.__init__(self, **kwargs)  # super().__init__, named: the base class is untyped
        self._stats = stats
        self._terms = {i: term for term, i in vocab.items()}

    def build_index_from_ids(self, unique_token_ids: list[int], corpus_token_ids: list[list[int]],
                             show_progress: bool = True, leave_progress: bool = False) -> dict[str, Any]:
        local: dict[int, int] = _scoring._calculate_doc_freqs(corpus_token_ids, unique_token_ids, show_progress=False)
        corpus_df = {i: self._stats.doc_freqs.get(self._terms[i], 0) for i in local}
        idf_fn: Callable[..., float] = _scoring._select_idf_scorer(self.idf_method)
        avg = self._stats.avg_length
        self.nonoccurrence_array = None
        if self.method in self.methods_requiring_nonoccurrence:
            tfc_fn: Callable[..., np.ndarray] = _scoring._select_tfc_scorer(self.method)
            self.nonoccurrence_array = _scoring._build_nonoccurrence_array(
                doc_frequencies=corpus_df, n_docs=self._stats.n_docs, compute_idf_fn=idf_fn,
                calculate_tfc_fn=tfc_fn, l_d=avg, l_avg=avg,
                k1=self.k1, b=self.b, delta=self.delta, dtype=self.dtype,
            )
        idf: np.ndarray = _scoring._build_idf_array(corpus_df, n_docs=self._stats.n_docs, compute_idf_fn=idf_fn,
                                                    dtype=self.dtype)
        values: np.ndarray
        rows: np.ndarray
        cols: np.ndarray
        values, rows, cols = _scoring._build_scores_and_indices_for_matrix(
            corpus_token_ids=corpus_token_ids, idf_array=idf, avg_doc_len=avg, doc_frequencies=local,
            k1=self.k1, b=self.b, delta=self.delta, nonoccurrence_array=self.nonoccurrence_array,
            method=self.method, dtype=self.dtype, int_dtype=self.int_dtype, show_progress=False,
        )
        matrix: _SparseColumns = _sparse.csc_matrix((values, (rows, cols)), shape=(len(corpus_token_ids), len(unique_token_ids)),
                                                    dtype=self.dtype)
        return {"data": matrix.data, "indices": matrix.indices, "indptr": matrix.indptr, "num_docs": len(corpus_token_ids)}


class Bm25Index:
    """A bm25s index over some slots: row ``i`` of the index is slot ``slots[i]`` of the store."""

    def __init__(self, retriever: _Retriever | None, tokenizer: Tokenizer, slots: np.ndarray) -> None:
        self._retriever = retriever
        self._tokenizer = tokenizer
        self.slots = slots

    @classmethod
    def build(
        cls, texts: list[str], slots: np.ndarray, settings: Bm25Settings, stats: Bm25Stats | None = None
    ) -> Bm25Index:
        """Tokenise and index ``texts`` (``texts[i]`` is slot ``slots[i]``), scored with the corpus
        statistics ``stats`` (a shard of a larger corpus) or, if None, with those of ``texts``."""
        tokenizer = settings.tokenizer()
        if not texts:
            return cls(None, tokenizer, np.zeros(0, dtype=np.int64))
        tokens = _tokenized(tokenizer, texts)
        options: dict[str, Any] = {"k1": settings.k1, "b": settings.b, "method": settings.method}
        retriever: _Retriever = _bm25s.BM25(**options) if stats is None else _CorpusStatsBM25(stats, tokens.vocab, **options)
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
        retriever: _Retriever = _bm25s.BM25.load(str(directory), show_progress=False)
        tokenizer = settings.tokenizer()
        tokenizer.load_vocab(str(directory))
        n = int(retriever.scores["num_docs"])
        return cls(retriever, tokenizer, np.arange(n, dtype=np.int64))

    def search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` documents with a positive score: ``(scores float32 (m,), slots int64 (m,))``, m ≤ k."""
        if self._retriever is None or k <= 0:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
        ids = self._tokenizer.tokenize([query], update_vocab=False, return_as="ids", show_progress=False)
        if not isinstance(ids, list):
            raise TypeError(f"bm25s tokenize(return_as='ids') returned {type(ids).__name__}, not a list")
        query_ids = cast("list[list[int]]", ids)[0]  # return_as="ids": one list of token ids per text
        scores = np.asarray(self._retriever.get_scores(query_ids), dtype=np.float32)
        positive = int(np.count_nonzero(scores > 0))
        k = min(k, positive)
        if k == 0:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
        threshold = scores[np.argpartition(-scores, k - 1)[:k]].min()
        rows = np.flatnonzero(scores >= threshold)  # every tie at the k-th score, then cut by slot
        rows = rows[np.lexsort((self.slots[rows], -scores[rows]))][:k]
        return scores[rows], self.slots[rows]

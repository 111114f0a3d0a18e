"""Candidate lists per query: from a TREC run, BM25 (bm25s) or exact FP32 dense search.

Every list is in first-stage order (score descending); that order is the ``input`` tie-break of
the metrics' oblivious value, as in a serving stack that reranks what retrieval handed over.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from steadyrank.metrics import read_trec_run
from steadyrank.retrieval.bm25 import Bm25Index, Bm25Settings

Candidates = dict[str, list[str]]


def from_run(path: str, query_ids: list[str], corpus_ids: Mapping[str, object], depth: int) -> Candidates:
    """The top ``depth`` documents of each query in a TREC run, by run score (stable)."""
    run = read_trec_run(path)
    out: Candidates = {}
    for qid in query_ids:
        ranking = run.get(qid, {})
        missing = next((d for d in ranking if d not in corpus_ids), None)
        if missing is not None:
            raise ValueError(f"{path}: document {missing!r} (query {qid}) is not in the corpus")
        docids = list(ranking)
        order = np.argsort(-np.array([ranking[d] for d in docids], dtype=np.float64), kind="stable")
        out[qid] = [docids[i] for i in order[:depth]]
    return out


def bm25(queries: Mapping[str, str], doc_ids: list[str], doc_texts: list[str], depth: int) -> Candidates:
    """BM25 top ``depth`` (English stemming and stopwords; documents sharing no term are left out)."""
    index = Bm25Index.build(doc_texts, np.arange(len(doc_ids)), Bm25Settings())
    return {qid: [doc_ids[s] for s in index.search(text, depth)[1]] for qid, text in queries.items()}


def dense(
    queries: Mapping[str, str],
    doc_ids: list[str],
    doc_texts: list[str],
    depth: int,
    embed: Callable[[list[str]], np.ndarray],
) -> Candidates:
    """Exact inner-product search over FP32-normalised embeddings (``embed`` returns (n, dim))."""
    qids = list(queries)
    vectors = embed([queries[q] for q in qids] + doc_texts)
    q, d = vectors[: len(qids)], vectors[len(qids) :]
    scores = q @ d.T
    out: Candidates = {}
    for i, qid in enumerate(qids):
        top = np.argsort(-scores[i], kind="stable")[:depth]
        out[qid] = [doc_ids[j] for j in top]
    return out

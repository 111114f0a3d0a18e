"""Chunked reranking: documents cut into passages of the reranker's tokens, and the chunks' rank
keys combined into one key per document. Pure Python and numpy (the ingress plans, no torch).

Plan (:func:`chunk_spans`): a document's tokens ``t_0 … t_{n-1}`` (its own tokenisation, no
special tokens) with character offsets are cut into chunks of at most ``room`` tokens that overlap
by ``overlap`` tokens: chunk k covers tokens ``[s_k, e_k)``, ``e_k = min(s_k + room, n)``, and
``s_{k+1} = e_k − overlap``. A cut inside a word moves back to the word's start (a word = tokens
with no character between them, e.g. WordPiece's ``##`` pieces), so every chunk's text tokenises
alone as it did inside the document; a word longer than ``room`` is cut where it must be. At most
``max_chunks`` chunks are made; the tokens after the last one are not scored (the document is
reported as truncated). A chunk's text is ``document[start:end]``, the character span of its
first token's start and its last token's end.

Aggregate (:func:`aggregate_max`): a document's rank key is the largest of its chunks' FP32 rank
keys (HPS: the logit, so the max is taken where the sigmoid cannot saturate); its winning chunk is
the first chunk holding that key (the lowest chunk index among equal keys), and its score is that
chunk's score (φ is increasing, so the same chunk has the largest score).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from steadyrank.retrieval.pipeline import PassScores, SearchModels
from steadyrank.serve.errors import InputTooLongError

Span = tuple[int, int]


@dataclass(frozen=True)
class InputRoom:
    """One model input's token budget: ``max_length`` tokens (the effective one), of which
    ``reserve`` are not the document's when the query is empty (special tokens, a causal LM's prompt
    template with the model's instruction, a bi-encoder's document prompt); with
    ``query_in_input`` the query's tokens (and a request's instruction's) share the input too.
    A document chunk may hold ``max_length − reserve − (query tokens if query_in_input)`` tokens."""

    max_length: int
    reserve: int
    query_in_input: bool

    def facts(self) -> dict[str, int | bool]:
        """As a reranker's ``info()`` reports it (:meth:`from_facts` reads it back)."""
        return {"input_max_length": self.max_length, "input_reserve": self.reserve,
                "query_in_input": self.query_in_input}

    @classmethod
    def from_facts(cls, facts: dict[str, Any]) -> InputRoom:
        return cls(int(facts["input_max_length"]), int(facts["input_reserve"]), bool(facts["query_in_input"]))


def chunk_spans(offsets: Sequence[tuple[int, int]], text_length: int, room: int, overlap: int,
                max_chunks: int) -> tuple[list[Span], bool]:
    """``(character spans of the chunks, whether tokens were left unscored)`` of one document whose
    tokens have ``offsets`` (module docstring). A document of no tokens is one chunk, itself."""
    if room < 1:
        raise ValueError(f"room must be ≥ 1 token, got {room}")
    overlap = min(overlap, room - 1)
    n = len(offsets)
    if n == 0:
        return [(0, text_length)], False
    starts_word = [i == 0 or offsets[i][0] > offsets[i - 1][1] for i in range(n)]
    spans: list[Span] = []
    start = 0
    while True:
        end = min(start + room, n)
        if end < n and not starts_word[end]:
            back = next((j for j in range(end - 1, start, -1) if starts_word[j]), start)
            end = back if back > start else end  # a word longer than room is cut inside
        spans.append((offsets[start][0], offsets[end - 1][1]))
        if end >= n:
            return spans, False
        if len(spans) == max_chunks:
            return spans, True
        nxt = max(end - overlap, start + 1)
        snapped = next((j for j in range(nxt, start, -1) if starts_word[j]), nxt)
        start = snapped if snapped > start else nxt


@dataclass(frozen=True)
class ChunkPlan:
    """A request's documents as chunks: ``texts`` (every chunk, document by document),
    ``counts[d]`` chunks of document d (its chunks are ``texts[starts[d]:starts[d] + counts[d]]``),
    ``spans``: each chunk's character span in its document, ``cut``: documents with tokens left
    unscored (more than ``max_chunks`` chunks' worth)."""

    texts: list[str]
    counts: list[int]
    spans: list[Span]
    cut: list[int]

    @property
    def starts(self) -> np.ndarray:
        """Index in ``texts`` of each document's first chunk."""
        return np.concatenate([[0], np.cumsum(self.counts[:-1])]).astype(np.int64)


def aggregate_max(keys: np.ndarray, counts: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """``(document keys, winning chunk of each document (index within the document))`` from the
    chunks' ``keys`` (document by document, ``counts[d]`` chunks of document d; every count ≥ 1)."""
    keys = np.asarray(keys)
    sizes = np.asarray(counts, dtype=np.int64)
    if sizes.size == 0 or sizes.min() < 1 or int(sizes.sum()) != keys.size:
        raise ValueError("every document needs at least one chunk, and the counts must cover the keys")
    starts = np.concatenate([[0], np.cumsum(sizes[:-1])])
    best = np.maximum.reduceat(keys, starts)
    winners = np.array([int(np.argmax(keys[s:s + c] == b)) for s, c, b in zip(starts, sizes, best, strict=True)],
                       dtype=np.int64)
    return best, winners


#: ``encode(texts, special_tokens) -> [(token ids, (start, end) character offsets)]`` of a tokenizer
Encode = Callable[[list[str], bool], list[tuple[list[int], list[tuple[int, int]]]]]


def plan_chunks(encode: Encode, documents: Sequence[str], room: int, overlap: int, max_chunks: int,
                max_total: int, each: Callable[[int], None] | None = None) -> ChunkPlan:
    """The chunks of ``documents`` (:func:`chunk_spans`, ``max_chunks`` per document), tokenised one
    document at a time so that a request whose chunks pass ``max_total`` is refused (413,
    InputTooLongError) at the first document that passes it, before the rest are tokenised;
    ``each(d)`` is called before document d (it may raise: the request's deadline)."""
    if len(documents) > max_total:
        raise InputTooLongError(f"documents expand into at least {len(documents)} chunks, more than the limit of "
                                f"{max_total} per request (chunking.max_chunks_per_request)")
    texts: list[str] = []
    counts: list[int] = []
    spans: list[Span] = []
    cut: list[int] = []
    for d, document in enumerate(documents):
        if each is not None:
            each(d)
        [(_, offsets)] = encode([document], False)
        found, left = chunk_spans(offsets, len(document), room, overlap, max_chunks)
        if len(spans) + len(found) + (len(documents) - d - 1) > max_total:
            raise InputTooLongError(f"documents expand into more than {max_total} chunks (document {d} alone into "
                                    f"{len(found)}), the limit per request (chunking.max_chunks_per_request)")
        texts.extend(document[s:e] for s, e in found)
        counts.append(len(found))
        spans.extend(found)
        if left:
            cut.append(d)
    return ChunkPlan(texts, counts, spans, cut)


def chunked_models(models: SearchModels, plan: Callable[[str, list[str]], ChunkPlan]) -> SearchModels:
    """``models`` with chunked reranking (the offline pipeline: ``steadyrank search``): each pass
    scores ``plan(query, texts)``'s chunks with the models' own ``score``, a candidate's key is the
    largest of its chunks' keys and its score that chunk's (:func:`aggregate_max`); a boundary tie is
    re-scored in FP32 over every chunk of the tied candidates, aggregated alike. Chunks are scored by
    the reranker, never from stored vectors (a stored vector is the whole document's)."""
    score, fp32_keys = models.score, models.fp32_keys
    if score is None:
        return models

    async def chunked_score(query: str, texts: list[str]) -> PassScores:
        chunks = plan(query, texts)
        found = await score(query, chunks.texts)
        keys, winners = aggregate_max(found.keys, chunks.counts)
        return PassScores(found.scores[chunks.starts + winners], keys)

    async def chunked_fp32(query: str, texts: list[str]) -> np.ndarray:
        assert fp32_keys is not None
        chunks = plan(query, texts)
        return aggregate_max(await fp32_keys(query, chunks.texts), chunks.counts)[0]

    return replace(models, score=chunked_score, fp32_keys=None if fp32_keys is None else chunked_fp32,
                   stored_vectors=False)


def document_room(room: InputRoom, query_tokens: int, chunk_tokens: int | None) -> int:
    """Tokens a chunk may hold beside a query of ``query_tokens`` tokens (:class:`InputRoom`), at most
    ``chunk_tokens``; InputTooLongError when the query leaves none."""
    left = room.max_length - room.reserve - (query_tokens if room.query_in_input else 0)
    if left < 1:
        raise InputTooLongError(f"the query takes {query_tokens} tokens: the reranker's input of {room.max_length} "
                                "tokens leaves no room for a document chunk")
    return min(left, chunk_tokens or left)


def chunk_planner(encode: Encode, room: InputRoom, chunk_tokens: int | None, overlap: int,
                  per_doc: int) -> Callable[[str, list[str]], ChunkPlan]:
    """``plan(query, texts)`` for :func:`chunked_models`: the chunks of ``texts`` sized beside ``query``
    (:func:`document_room`), at most ``per_doc`` per text (offline: no limit per request)."""

    def plan(query: str, texts: list[str]) -> ChunkPlan:
        [(query_ids, _)] = encode([query], False)
        size = document_room(room, len(query_ids), chunk_tokens)
        return plan_chunks(encode, texts, size, overlap, per_doc, len(texts) * per_doc)

    return plan

"""Turn texts, (query, document) pairs and yes/no prompts into token ids, with truncation flags.

Every builder cuts only the document (never the query or the prompt template) to ``max_length``
tokens in total, on the tokenizer's ``truncation_side``, and reports which inputs were cut. With
``overflow="error"`` an over-long input raises :class:`InputTooLongError` instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from steadyrank.serve.errors import InputTooLongError
from steadyrank.serve.runtime.prompts import fill


@dataclass(frozen=True)
class Encoded:
    """Token ids per input (unpadded), token type ids when the model uses them, truncation flags."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]] | None
    truncated: np.ndarray  # bool (n,)


def _refuse_overflow(index: int, n_tokens: int, max_length: int) -> None:
    raise InputTooLongError(
        f"input {index} has {n_tokens} tokens, more than max_length={max_length} (overflow='error')"
    )


def encode_texts(
    tokenizer: Any, texts: Sequence[str], max_length: int, overflow: Literal["truncate", "error"], prompt: str = ""
) -> Encoded:
    """Single texts with the tokenizer's special tokens (bi-encoder input), each after ``prompt``
    (sentence-transformers' rule: the prompt is text put before the input, tokenised with it and
    counted in ``max_length``). An over-long text is cut, never its prompt: on the left side the
    prompt's tokens (:func:`prompt_length`) are kept and the text's last tokens fill the rest.

    Raises InputTooLongError when the prompt leaves no room for the text.
    """
    texts = [prompt + t for t in texts] if prompt else list(texts)
    full = tokenizer(texts, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
    truncated = np.array([len(ids) > max_length for ids in full], dtype=bool)
    ids = list(full)
    keep = prompt_length(tokenizer, prompt) if truncated.any() else 0
    if keep >= max_length - 1:
        raise InputTooLongError(f"the prompt takes {keep} tokens: max_length={max_length} leaves no room for the text")
    for i in map(int, np.flatnonzero(truncated)):
        if overflow == "error":
            _refuse_overflow(i, len(full[i]), max_length)
        if keep and tokenizer.truncation_side == "left":
            ids[i] = full[i][:keep] + full[i][len(full[i]) - (max_length - keep):]
        else:
            ids[i] = tokenizer(texts[i], truncation=True, max_length=max_length, verbose=False)["input_ids"]
    return Encoded(ids, None, truncated)


def prompt_length(tokenizer: Any, prompt: str) -> int:
    """The leading tokens of a prompted text that are the prompt's, as sentence-transformers counts
    them: the prompt tokenised alone with special tokens, less a trailing special token."""
    if not prompt:
        return 0
    ids = tokenizer(prompt, add_special_tokens=True, verbose=False)["input_ids"]
    return len(ids) - (1 if ids and ids[-1] in tokenizer.all_special_ids else 0)


def encode_pairs(
    tokenizer: Any,
    pairs: Sequence[tuple[str, str]],
    max_length: int,
    overflow: Literal["truncate", "error"],
) -> Encoded:
    """(query, document) pairs as one sequence with special tokens (cross-encoder input).

    Raises InputTooLongError when a query alone leaves no room for its document.
    """
    queries = [q for q, _ in pairs]
    docs = [d for _, d in pairs]
    full = tokenizer(queries, docs, truncation=False, verbose=False)
    truncated = np.array([len(ids) > max_length for ids in full["input_ids"]], dtype=bool)
    ids = list(full["input_ids"])
    types = list(full["token_type_ids"]) if "token_type_ids" in full else None
    room = max_length - tokenizer.num_special_tokens_to_add(pair=True)
    for i in np.flatnonzero(truncated):
        if overflow == "error":
            _refuse_overflow(int(i), len(ids[i]), max_length)
        query_tokens = len(tokenizer(queries[i], add_special_tokens=False)["input_ids"])
        if query_tokens >= room:
            raise InputTooLongError(
                f"query has {query_tokens} tokens: max_length={max_length} leaves no room for the document"
            )
        cut = tokenizer(queries[i], docs[i], truncation="only_second", max_length=max_length, verbose=False)
        ids[i] = cut["input_ids"]
        if types is not None:
            types[i] = cut["token_type_ids"]
    return Encoded(ids, types, truncated)


def encode_prompts(
    tokenizer: Any,
    pairs: Sequence[tuple[str, str]],
    template: str,
    instruction: str,
    max_length: int,
    overflow: Literal["truncate", "error"],
    side: Literal["right", "left"],
) -> Encoded:
    """Causal-LM prompts ``template`` with {instruction}, {query}, {document} filled in
    (:func:`serve.runtime.prompts.fill`: the query and instruction are text, never slots).

    The prompt is tokenised whole (no extra special tokens: the template carries its own). When it
    exceeds ``max_length`` it becomes prefix tokens + the document's tokens cut on ``side`` +
    suffix tokens, so that the template, the instruction and the query survive intact.
    """
    head, tail = template.split("{document}")
    ids: list[list[int]] = []
    truncated = np.zeros(len(pairs), dtype=bool)
    for i, (query, doc) in enumerate(pairs):
        values = {"instruction": instruction, "query": query}
        prefix, suffix = fill(head, values), fill(tail, values)
        full = tokenizer(prefix + doc + suffix, add_special_tokens=False)["input_ids"]
        if len(full) <= max_length:
            ids.append(full)
            continue
        if overflow == "error":
            _refuse_overflow(i, len(full), max_length)
        prefix_ids = tokenizer(prefix, add_special_tokens=False)["input_ids"]
        suffix_ids = tokenizer(suffix, add_special_tokens=False)["input_ids"]
        room = max_length - len(prefix_ids) - len(suffix_ids)
        if room < 1:
            raise InputTooLongError(
                f"prompt template, instruction and query take {max_length - room} tokens: "
                f"max_length={max_length} leaves no room for the document"
            )
        doc_ids = tokenizer(doc, add_special_tokens=False)["input_ids"]
        kept = doc_ids[:room] if side == "right" else doc_ids[len(doc_ids) - room :]
        ids.append(prefix_ids + kept + suffix_ids)
        truncated[i] = True
    return Encoded(ids, None, truncated)

"""Document texts of the vendor shapes: Cohere objects ranked on ``rank_fields``, and the
per-document token cut of ``max_tokens_per_doc``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

DocumentInput = str | dict[str, Any]


def document_text(document: DocumentInput, rank_fields: Sequence[str] | None) -> str:
    """The text ranked for one document.

    A string is itself. An object with no ``rank_fields`` is ranked on its ``text`` field when
    that is a string (Cohere's default field). Otherwise the object is ranked on the YAML of its
    ``rank_fields`` (all its fields when none are given), in the order given, fields it lacks
    skipped — Cohere's rendering of objects, as langchain-cohere writes it.
    """
    if isinstance(document, str):
        return document
    if not rank_fields and isinstance(document.get("text"), str):
        return document["text"]
    fields = rank_fields or list(document)
    chosen = {field: document[field] for field in fields if field in document}
    return yaml.safe_dump(chosen, sort_keys=False, allow_unicode=True) if chosen else ""


def document_texts(documents: Sequence[DocumentInput], rank_fields: Sequence[str] | None,
                   each: Callable[[int, str], None]) -> list[str]:
    """The texts ranked for ``documents`` (:func:`document_text`), ``each(i, text)`` called as each
    is made: it may raise (a size limit, the request's deadline) to stop before the rest are
    rendered. The work is bounded by the body: a document renders at most its own fields, and
    looks up at most ``len(rank_fields)`` of them."""
    texts = []
    for i, document in enumerate(documents):
        texts.append(document_text(document, rank_fields))
        each(i, texts[-1])
    return texts


class TokenCutter:
    """Cuts texts to their first ``n`` tokens of a model's tokenizer (special tokens not counted);
    the cut is made in the original string at the end offset of token ``n``, so the kept prefix is
    the user's text verbatim. The tokenizer is loaded on first use: the model's ``tokenizer.json``
    through the ``tokenizers`` library (no torch in the ingress), else transformers' AutoTokenizer."""

    def __init__(self, model: Any) -> None:
        self.model = model  # runtime ModelSettings
        self._encode: Any = None
        self._lock = threading.Lock()

    def encoder(self) -> Any:
        """``encode(texts, special) -> [(token ids, (start, end) offsets)]``, loaded once."""
        with self._lock:
            if self._encode is None:
                self._encode = _load_encoder(Path(str(self.model.model_path())))
            return self._encode

    def cut(self, texts: Sequence[str], max_tokens: int) -> tuple[list[str], list[int]]:
        """``(texts cut to max_tokens tokens, indices of the texts that were cut)``."""
        out, cut = [], []
        for i, (text, (_, offsets)) in enumerate(zip(texts, self.encoder()(list(texts), False), strict=True)):
            if len(offsets) > max_tokens:
                out.append(text[: offsets[max_tokens - 1][1]])
                cut.append(i)
            else:
                out.append(text)
        return out, cut

    def count(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text as the model reads it (special tokens included)."""
        return [len(ids) for ids, _ in self.encoder()(list(texts), True)]


def _load_encoder(path: Path) -> Any:
    """The model's tokenizer as ``encode(texts, special)``: its ``tokenizer.json`` with truncation
    and padding off (what transformers' fast tokenizer runs), or AutoTokenizer when it has none."""
    if (path / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        fast = Tokenizer.from_file(str(path / "tokenizer.json"))
        fast.no_truncation()
        fast.no_padding()
        return lambda texts, special: [(e.ids, e.offsets) for e in fast.encode_batch(texts, add_special_tokens=special)]
    from transformers import AutoTokenizer

    slow = AutoTokenizer.from_pretrained(str(path), local_files_only=True)

    def encode(texts: list[str], special: bool) -> list[tuple[list[int], list[tuple[int, int]]]]:
        found = slow(texts, add_special_tokens=special, return_offsets_mapping=not special, truncation=False)
        offsets = found.get("offset_mapping") or [[] for _ in texts]
        return list(zip(found["input_ids"], offsets, strict=True))

    return encode

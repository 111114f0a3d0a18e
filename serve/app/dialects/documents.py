"""Document texts of the vendor shapes: Cohere objects ranked on ``rank_fields``, and the
per-document token cut of ``max_tokens_per_doc``."""

from __future__ import annotations

import threading
from collections.abc import Sequence
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


class TokenCutter:
    """Cuts texts to their first ``n`` tokens of a model's tokenizer (special tokens not counted);
    the cut is made in the original string at the end offset of token ``n``, so the kept prefix is
    the user's text verbatim. The tokenizer is loaded on first use."""

    def __init__(self, model: Any) -> None:
        self.model = model  # runtime ModelSettings
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def tokenizer(self) -> Any:
        with self._lock:
            if self._tokenizer is None:
                from transformers import AutoTokenizer

                self._tokenizer = AutoTokenizer.from_pretrained(str(self.model.model_path()), local_files_only=True)
            return self._tokenizer

    def cut(self, texts: Sequence[str], max_tokens: int) -> tuple[list[str], list[int]]:
        """``(texts cut to max_tokens tokens, indices of the texts that were cut)``."""
        encoded = self.tokenizer()(list(texts), add_special_tokens=False, return_offsets_mapping=True,
                                   truncation=False)
        out, cut = [], []
        for i, (text, offsets) in enumerate(zip(texts, encoded["offset_mapping"], strict=False)):
            if len(offsets) > max_tokens:
                out.append(text[: offsets[max_tokens - 1][1]])
                cut.append(i)
            else:
                out.append(text)
        return out, cut

    def count(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text as the model reads it (special tokens included)."""
        return [len(ids) for ids in self.tokenizer()(list(texts), truncation=False)["input_ids"]]

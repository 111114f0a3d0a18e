"""The retrieval modes, one type for every layer: ``dense`` (cosine), ``bm25``, ``hybrid`` (RRF of both)."""

from __future__ import annotations

from typing import Literal

Mode = Literal["dense", "bm25", "hybrid"]
MODES: tuple[Mode, ...] = ("dense", "bm25", "hybrid")

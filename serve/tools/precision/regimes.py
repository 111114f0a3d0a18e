"""Precision regimes: a forward dtype and a scoring mode, written ``fp32``, ``bf16``, ``bf16+hps``.

Forward precisions: ``fp32``, ``bf16``, ``fp16``, ``int8`` (CPU only: dynamic int8 Linear layers,
FP32 activations and logits, so ``int8`` applies φ to FP32 logits and its ties are those of φ's own
FP32 rounding) and ``auto`` (what ``precision: auto`` picks on this machine, reported beside the tables).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast, get_args

from steadyrank.serve.runtime.settings import Precision, Scoring

DEFAULT_REGIMES = "fp32,bf16,bf16+hps,fp16,fp16+hps"
REFERENCE = "fp32"


@dataclass(frozen=True)
class Regime:
    """``bf16`` = BF16 forward, φ in BF16 (native); ``bf16+hps`` = BF16 forward, φ in FP32.
    ``fp32`` is the reference (HPS and native coincide there)."""

    name: str
    precision: Precision
    scoring: Scoring


def parse_regime(text: str) -> Regime:
    """Parse ``PRECISION`` or ``PRECISION+hps``; raise ValueError otherwise."""
    name = text.strip().lower()
    precision, _, suffix = name.partition("+")
    if precision not in get_args(Precision) or suffix not in ("", "hps"):
        raise ValueError(f"unknown regime {text!r}: expected PRECISION or PRECISION+hps, "
                         f"PRECISION one of {', '.join(get_args(Precision))}")
    scoring: Scoring = "hps" if suffix or precision == "fp32" else "native"
    return Regime(name, cast(Precision, precision), scoring)  # a member of Precision: checked above


def parse_regimes(text: str) -> list[Regime]:
    """Comma-separated regimes, duplicates dropped, order kept."""
    names = [part for part in text.split(",") if part.strip()]
    if not names:
        raise ValueError("no regimes given")
    return list({r.name: r for r in map(parse_regime, names)}.values())

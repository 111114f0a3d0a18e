"""The metrics' tunable constants, validated once (docs/ARCHITECTURE.md "Metric definitions")."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class MetricParams:
    """Constants of RA-nWG, its novelty-discounted variant and UDCG.

    ``rarity_alpha`` (α ≥ 0): RA-nWG's rarity exponent, ``r_g = b_g / p_g^α``; ``rarity_cap4`` and
    ``rarity_cap3`` (≥ 0): the caps of ``w4`` and ``w3`` relative to ``w5`` (the paper's 1.0 and
    0.25). ``novelty_beta`` (β in [0, 1)): the weight of an item whose source or facet an item
    ranked before it already brought. ``udcg_distraction`` (λ ≥ 0): UDCG's weight of a distracting
    passage (the authors' reference code: 1/3).
    """

    rarity_alpha: float = 1.0
    rarity_cap4: float = 1.0
    rarity_cap3: float = 0.25
    novelty_beta: float = 0.5
    udcg_distraction: float = 1.0 / 3.0

    def __post_init__(self) -> None:
        for name in ("rarity_alpha", "rarity_cap4", "rarity_cap3", "novelty_beta", "udcg_distraction"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        if self.novelty_beta >= 1:
            raise ValueError(f"novelty_beta must be in [0, 1), got {self.novelty_beta}")

    @property
    def is_default(self) -> bool:
        return self == MetricParams()

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

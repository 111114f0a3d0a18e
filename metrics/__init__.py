"""Tie-aware retrieval metrics (pure numpy). See DESIGN.md "Definitions" for the formulas."""

from metrics.ties import rank_order, straddling_group, tie_groups

__all__ = ["rank_order", "straddling_group", "tie_groups"]

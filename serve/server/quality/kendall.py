"""Kendall's τ-b through scipy, typed (the golden-set audit and simulation, the canary comparison).

scipy ships no type information, and the decorators around ``scipy.stats.kendalltau``
(``xp_capabilities``, ``_axis_nan_policy_factory``) hide its ``SignificanceResult`` from a type
checker, which then sees an opaque class with no ``statistic``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, cast

from scipy.stats import kendalltau

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


class _Correlation(Protocol):
    """What ``kendalltau`` returns (``scipy.stats._result_classes.SignificanceResult``)."""

    statistic: float
    pvalue: float


def kendall_tau_b(x: ArrayLike, y: ArrayLike) -> float:
    """Kendall's τ-b of ``x`` and ``y`` (``float(scipy.stats.kendalltau(x, y).statistic)``; nan where undefined)."""
    return float(cast(_Correlation, kendalltau(x, y)).statistic)

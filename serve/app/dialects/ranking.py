"""The internal rerank result (``Reranker.rerank``) as the pieces every dialect answers with."""

from __future__ import annotations

from typing import Any


def served_order(out: dict[str, Any], top_n: int | None) -> list[int]:
    """Input indices in served order (score descending, ties by input index unless boundary
    re-scoring settled them), the first ``top_n`` (all when None)."""
    order = [int(i) for i in out["order"]]
    return order if top_n is None else order[:top_n]


def tie_facts(out: dict[str, Any]) -> dict[str, Any]:
    """steadyrank's precision and tie facts of one ranking (``RerankMeta``)."""
    return {
        "precision": out["precision"],
        "scoring": out["scoring"],
        "tie_groups": out["tie_groups"],
        "tie_at_cutoff": bool(out["tie_at_cutoff"]),
        "rescored_ties": int(out["rescored"]),
        "truncated": out["truncated"],
    }

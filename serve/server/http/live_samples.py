"""The samples of served answers the ingress hands live judging after replying
(:mod:`serve.server.quality.live_judging`): only with ``quality.live_judging.enabled``, only the top
``depth`` results, and through :meth:`Gateway.detach`, so a request never waits for them."""

from __future__ import annotations

from typing import Any

from steadyrank.serve.server.calls import RerankOutcome, SearchCall, SearchOutcome
from steadyrank.serve.settings import Settings


def search_sample(settings: Settings, query: str, call: SearchCall, out: SearchOutcome,
                  request_id: str) -> dict[str, Any] | None:
    """The live sample of a served search (its results' texts are there only with ``return_documents``;
    live judging counts one without them as ``no_text``), or None when live judging is off."""
    live = settings.quality.live_judging
    if not live.enabled:
        return None
    served = [{"id": r.id, "score": r.relevance_score, "text": r.text} for r in out.results[: live.depth]]
    return {"route": "search", "query": query, "request_id": request_id, "request": call.model_dump(),
            "served": served}


def rerank_sample(settings: Settings, query: str, texts: list[str], out: RerankOutcome, top_n: int | None,
                  request_id: str) -> dict[str, Any] | None:
    """The live sample of a served ``/v1/rerank`` answer (the documents as rendered for the model), or None."""
    live = settings.quality.live_judging
    if not live.enabled:
        return None
    order = out.served_order(top_n)[: live.depth]
    served = [{"id": i, "score": float(out.scores[i]), "text": texts[i]} for i in order]
    return {"route": "rerank", "query": query, "request_id": request_id, "served": served}

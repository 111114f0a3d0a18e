"""The internal rerank, embedding and search paths the routes end in: limits first (counts, then
sizes, before any per-document work), then the call through the gateway under work-based admission."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from steadyrank.serve.app import tracing
from steadyrank.serve.app.errors import schema_error
from steadyrank.serve.app.http.gateway import Gateway
from steadyrank.serve.app.http.services import Services, search_work
from steadyrank.serve.contracts import RerankOutcome, SearchCall, SearchOutcome
from steadyrank.serve.runtime.errors import EmptyInputError, InputTooLongError

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def parse(body: bytes, model: type[M]) -> M:
    """``body`` as ``model`` (422 naming the fields; 400 for a body that is not JSON, nested too
    deep, or not UTF-8)."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise schema_error(exc) from None


def check_query(limits: Any, query: str) -> None:
    if not query.strip():
        raise EmptyInputError("query must not be empty")
    if len(query) > limits.max_query_chars:
        raise InputTooLongError(f"query has {len(query)} characters, more than the limit of {limits.max_query_chars}")


def check_count(items: Sequence[Any], field: str, max_items: int) -> None:
    """Empty (400) or more than ``max_items`` (413): checked before anything is done per item."""
    if not items:
        raise EmptyInputError(f"{field} must not be empty")
    if len(items) > max_items:
        raise InputTooLongError(f"{field} has {len(items)} items, more than the limit of {max_items}")


def check_sizes(limits: Any, texts: Sequence[str], field: str) -> None:
    limit = limits.max_document_chars
    for i, text in enumerate(texts):
        if len(text) > limit:
            raise InputTooLongError(f"{field}[{i}] has {len(text)} characters, more than the limit of {limit}")


async def off_loop(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on a worker thread (per-document work must not hold the event loop)."""
    return await asyncio.to_thread(fn, *args)


class Scoring:
    """The rerank, embedding and search calls of the routes (one per ingress replica)."""

    def __init__(self, services: Services, gateway: Gateway) -> None:
        self.services = services
        self.gateway = gateway
        self.limits = services.settings.limits
        self.search_work = search_work(services.settings)

    async def rerank(self, request: Request, query: str, texts: list[str], top_n: int | None, model: str | None,
                     field: str = "documents") -> RerankOutcome:
        """Limits, the model name, then the Reranker's ``rerank`` under the deadline. ``top_n`` is
        clamped to the number of texts."""
        deadline = self.gateway.deadline(request)
        check_query(self.limits, query)
        check_count(texts, field, self.limits.max_documents)
        check_sizes(self.limits, texts, field)
        self.services.names.resolve("reranker", model)
        top_n = min(top_n, len(texts)) if top_n is not None else None
        ends = time.time() + deadline
        reranker = self.services.reranker
        with tracing.span("reranker.rerank", documents=len(texts)):
            return await self.gateway.model_call(request, "reranker", len(texts), deadline,
                                                 lambda: reranker.rerank.remote(query, texts, top_n, deadline=ends))

    def check_embedding_texts(self, texts: list[str], single: bool, field: str) -> None:
        """Embedding inputs: at least one, within the count limit, none blank, none too long."""
        check_count(texts, field, self.limits.max_embedding_inputs)
        for i, text in enumerate(texts):
            if not text.strip():
                raise EmptyInputError(f"{field} must not be empty" if single else f"{field}[{i}] must not be empty")
        check_sizes(self.limits, texts, field)

    async def embed(self, request: Request, texts: list[str], count_tokens: bool) -> dict[str, Any]:
        deadline = self.gateway.deadline(request)
        ends = time.time() + deadline
        embedder = self.services.embedder
        with tracing.span("embedder.embed", texts=len(texts)):
            return await self.gateway.model_call(request, "embedder", len(texts), deadline,
                                                 lambda: embedder.embed.remote(texts, count_tokens, deadline=ends))

    async def search(self, request: Request, call: SearchCall, deadline: float) -> SearchOutcome:
        """The Searcher's ``search`` under the deadline, admitted as :attr:`search_work`; the units
        it computed are the candidates it reranked (``meta.k``), or its one query embedding."""
        work = self.search_work
        searcher = self.services.searcher

        def computed(out: SearchOutcome) -> int:
            return out.meta.k if work.model == "reranker" else work.units

        with tracing.span("searcher.search", mode=call.mode or ""):
            return await self.gateway.model_call(request, work.model, work.units, deadline,
                                                 lambda: searcher.search.remote(call),
                                                 sized_by_body=False, computed=computed)

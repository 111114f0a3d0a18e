"""The internal rerank, embedding and search paths the routes end in: the body parsed once, under
its list limits (:func:`~serve.server.http.dialects.schema_limits.bounded`: a list over its limit is refused at
its (limit + 1)-th item), then the limits that need the settings, each checked once (counts, then
sizes, before any per-document work: :meth:`Scoring.rerank_texts`, :meth:`Scoring.check_embedding_texts`),
the per-document work (rendering, tokenising: off the event loop, under the request's deadline), then
the call through the gateway under work-based admission. The components behind the gateway trust
these calls and check nothing again (docs/ARCHITECTURE.md, "Where input is validated")."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import from_json
from starlette.requests import Request

from steadyrank.serve import tracing
from steadyrank.serve.errors import EmptyInputError, InputTooLongError, InvalidInputError
from steadyrank.serve.runtime.chunking import ChunkPlan, InputRoom, document_room, plan_chunks
from steadyrank.serve.server.admission.gate import search_work
from steadyrank.serve.server.calls import Deadline, EmbedOutcome, RerankOutcome, SearchCall, SearchOutcome
from steadyrank.serve.server.http.dialects.documents import DocumentInput, document_texts
from steadyrank.serve.server.http.dialects.schema_limits import bounded
from steadyrank.serve.server.http.errors import schema_error
from steadyrank.serve.server.http.gateway import Gateway, past_deadline
from steadyrank.serve.server.http.services import Services

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def parse(body: bytes, model: type[M], context: dict[str, Any] | None = None) -> M:
    """``body`` as ``model`` (422 naming the fields, 413 for a list over its ``max_length``; 400 for
    a body that is not JSON, nested too deep, or not UTF-8); ``context``: the validators' (the
    server's limits)."""
    try:
        return model.model_validate_json(body, context=context)
    except ValidationError as exc:
        raise schema_error(exc) from None


def decode(body: bytes) -> Any:
    """``body`` parsed as JSON (for a route that must look at it before it knows its model; 400 for
    a body that is not JSON, nested too deep, or not UTF-8)."""
    try:
        return from_json(body)
    except (ValueError, RecursionError) as exc:
        raise InvalidInputError(f"request body is not valid JSON: {exc}") from None


def validate(document: Any, model: type[M], context: dict[str, Any] | None = None) -> M:
    """A decoded body (:func:`decode`) as ``model``, as :func:`parse` answers."""
    try:
        return model.model_validate(document, context=context)
    except ValidationError as exc:
        raise schema_error(exc) from None


def check_query(limits: Any, query: str) -> None:
    if not query.strip():
        raise EmptyInputError("query must not be empty")
    if len(query) > limits.max_query_chars:
        raise InputTooLongError(f"query has {len(query)} characters, more than the limit of {limits.max_query_chars}")


def check_top_n(limits: Any, top_n: int | None) -> None:
    """A search's ``top_n`` (None: ``routing.top_n``) within ``limits.max_top_n`` (400 beyond)."""
    if top_n is not None and top_n > limits.max_top_n:
        raise InvalidInputError(f"top_n: must be ≤ {limits.max_top_n}, got {top_n}")


def check_instruction(limits: Any, instruction: str | None) -> None:
    """A request's ``instruction`` (None: none asked for): not blank (400), within
    ``limits.max_instruction_chars`` (413 beyond); checked before any model work."""
    if instruction is None:
        return
    if not instruction.strip():
        raise EmptyInputError("instruction must not be blank (omit it for the model's own)")
    if len(instruction) > limits.max_instruction_chars:
        raise InputTooLongError(f"instruction has {len(instruction)} characters, more than the limit of "
                                f"{limits.max_instruction_chars}")


def check_not_empty(items: Sequence[Any], field: str) -> None:
    """Empty is refused (400), before anything is done per item. (More items than the limit never
    get here: the parse refused them, :func:`~serve.server.http.dialects.schema_limits.bounded`.)"""
    if not items:
        raise EmptyInputError(f"{field} must not be empty")


def check_size(limits: Any, text: str, field: str, i: int) -> None:
    """Text ``i`` of ``field`` within ``limits.max_document_chars`` (413 beyond)."""
    if len(text) > limits.max_document_chars:
        raise InputTooLongError(f"{field}[{i}] has {len(text)} characters, more than the limit of "
                                f"{limits.max_document_chars}")


def check_sizes(limits: Any, texts: Sequence[str], field: str) -> None:
    for i, text in enumerate(texts):
        check_size(limits, text, field, i)


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
        self.values = self.limits.model_dump()
        self.models: dict[type[BaseModel], type[BaseModel]] = {}

    def model(self, model: type[M]) -> type[M]:
        """``model`` bounded by this server's limits (:func:`~serve.server.http.dialects.schema_limits.bounded`),
        derived once."""
        if model not in self.models:
            self.models[model] = bounded(model, self.values)
        return self.models[model]  # type: ignore[return-value]

    def parse(self, body: bytes, model: type[M]) -> M:
        """``body`` as ``model`` under this server's limits (:func:`parse`; the limits are also the
        validators' context)."""
        return parse(body, self.model(model), self.values)

    def validate(self, document: Any, model: type[M]) -> M:
        """A decoded body as ``model`` under this server's limits (:func:`validate`)."""
        return validate(document, self.model(model), self.values)

    async def rerank_texts(self, request: Request, query: str, documents: Sequence[DocumentInput], model: str | None,
                           instruction: str | None = None, rank_fields: list[str] | None = None,
                           field: str = "documents") -> list[str]:
        """The one validation step of a rerank request that needs the settings (every dialect's; after
        the parse, which refused a list over its limit): the query (400 blank, 413 over
        ``limits.max_query_chars``), the instruction (:func:`check_instruction`), at least one document
        (400), the model name (404), then the texts ranked (:meth:`texts`: each within
        ``limits.max_document_chars``, 413). Each rule once, all before any per-document work;
        :meth:`rerank` then trusts the texts."""
        check_query(self.limits, query)
        check_instruction(self.limits, instruction)
        check_not_empty(documents, field)
        self.services.names.resolve("reranker", model)
        return await self.texts(request, documents, rank_fields, field)

    async def texts(self, request: Request, documents: Sequence[DocumentInput], rank_fields: list[str] | None,
                    field: str = "documents") -> list[str]:
        """The texts ranked for ``documents`` (Cohere objects rendered: :func:`document_texts`), each
        within ``limits.max_document_chars`` (413 at the first over it, before the rest are rendered),
        rendered on a worker thread under the request's deadline (504 beyond)."""
        if all(isinstance(d, str) for d in documents):
            texts = [d for d in documents if isinstance(d, str)]
            check_sizes(self.limits, texts, field)
            return texts
        deadline, stated = self.gateway.deadline(request), self.gateway.timeout_s(request)

        def each(i: int, text: str) -> None:
            check_size(self.limits, text, field, i)
            if deadline.expired():
                raise past_deadline(stated)

        return await self.within(request, document_texts, documents, rank_fields, each)

    async def within(self, request: Request, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a worker thread (:func:`off_loop`) under the request's deadline (504 beyond;
        the thread runs on to its end)."""
        return await self.gateway.within(request, off_loop(fn, *args))

    async def rerank(self, request: Request, query: str, texts: list[str], top_n: int | None,
                     instruction: str | None = None, max_chunks_per_doc: int | None = None) -> RerankOutcome:
        """The Reranker's ``rerank`` of texts :meth:`rerank_texts` checked (with the request's
        ``instruction``) under what is left of the request's deadline. ``top_n`` is clamped to the
        number of texts.

        ``max_chunks_per_doc`` (None: ``chunking.default_max_chunks_per_doc``) above 1: chunked
        reranking (:meth:`plan`); the request is admitted as its chunks, the work units they are."""
        per_doc = self.chunks_per_doc(max_chunks_per_doc)
        plan = await self.plan(request, query, texts, instruction, per_doc) if per_doc > 1 else None
        top_n = min(top_n, len(texts)) if top_n is not None else None
        sent, chunks = (texts, None) if plan is None else (plan.texts, plan.counts)
        deadline = self.gateway.deadline(request)
        reranker = self.services.reranker
        with tracing.span("reranker.rerank", documents=len(texts), chunks=len(sent)):
            out = await self.gateway.model_call(
                request, "reranker", len(sent), deadline,
                lambda: reranker.rerank.remote(query, sent, top_n, deadline=deadline, instruction=instruction,
                                               chunks=chunks))
        if plan is None or out.winners is None:
            return out
        starts = plan.starts
        return replace(out, spans=[plan.spans[int(starts[d]) + w] for d, w in enumerate(out.winners)],
                       truncated=sorted({*out.truncated, *plan.cut}))

    def chunks_per_doc(self, asked: int | None) -> int:
        """The chunks per document a request gets: ``asked``, else ``chunking.default_max_chunks_per_doc``;
        more than ``chunking.max_chunks_per_doc`` is refused (413)."""
        chunking = self.services.settings.chunking
        per_doc = chunking.default_max_chunks_per_doc if asked is None else asked
        if per_doc > chunking.max_chunks_per_doc:
            raise InputTooLongError(f"max_chunks_per_doc: {per_doc} is more than the limit of "
                                    f"{chunking.max_chunks_per_doc} (chunking.max_chunks_per_doc)")
        return per_doc

    async def plan(self, request: Request, query: str, texts: list[str], instruction: str | None,
                   per_doc: int) -> ChunkPlan:
        """The chunks of ``texts`` (:func:`serve.runtime.chunking.plan_chunks`), tokenised with the
        reranker's tokenizer on a worker thread under the request's deadline, each chunk sized so that
        it fits one model input beside the query (the reranker's ``input_*`` facts); a request whose
        chunks pass ``chunking.max_chunks_per_request`` is refused (413) at the first document past it,
        before any forward pass."""
        chunking = self.services.settings.chunking
        facts = await self.gateway.model_facts("reranker")
        encode = self.services.reranker_tokens.encoder
        deadline, stated = self.gateway.deadline(request), self.gateway.timeout_s(request)

        def each(_: int) -> None:
            if deadline.expired():
                raise past_deadline(stated)

        def work() -> ChunkPlan:
            shared = 0
            if facts["query_in_input"]:
                asked = [query] if instruction is None else [query, instruction]
                shared = sum(len(ids) for ids, _ in encode()(asked, False))
            room = document_room(InputRoom.from_facts(facts), shared, chunking.chunk_tokens)
            return plan_chunks(encode(), texts, room, chunking.overlap_tokens, per_doc,
                               chunking.max_chunks_per_request, each)

        return await self.within(request, work)

    def check_embedding_texts(self, texts: list[str], single: bool, field: str) -> None:
        """Embedding inputs (the parse refused a list over the count limit): at least one, none
        blank, none too long."""
        check_not_empty(texts, field)
        for i, text in enumerate(texts):
            if not text.strip():
                raise EmptyInputError(f"{field} must not be empty" if single else f"{field}[{i}] must not be empty")
        check_sizes(self.limits, texts, field)

    async def embed(self, request: Request, texts: list[str], count_tokens: bool,
                    prompt: dict[str, Any] | None = None) -> EmbedOutcome:
        """The Embedder's ``embed`` under what is left of the request's deadline; ``prompt``: its
        prompt keywords (``role``, ``prompt_name``, ``instruction``: the instruction checked first)."""
        prompt = prompt or {}
        check_instruction(self.limits, prompt.get("instruction"))
        deadline = self.gateway.deadline(request)
        embedder = self.services.embedder
        with tracing.span("embedder.embed", texts=len(texts)):
            return await self.gateway.model_call(request, "embedder", len(texts), deadline,
                                                 lambda: embedder.embed.remote(texts, count_tokens, deadline=deadline,
                                                                               **prompt))

    async def search(self, request: Request, call: SearchCall, deadline: Deadline) -> SearchOutcome:
        """The Searcher's ``search`` under ``deadline`` (the request's),
        admitted as :attr:`search_work`; the units it computed are the candidates it reranked
        (``meta.k``), or its one query embedding."""
        work = self.search_work
        searcher = self.services.searcher

        def computed(out: SearchOutcome) -> int:
            return out.meta.k if work.model == "reranker" else work.units

        with tracing.span("searcher.search", mode=call.mode or ""):
            return await self.gateway.model_call(request, work.model, work.units, deadline,
                                                 lambda: searcher.search.remote(call),
                                                 sized_by_body=False, computed=computed)

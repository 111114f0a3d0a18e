"""Worst-case request bodies of every scoring route and dialect, within and just beyond the limits.

Each route's request has one list whose items are the work (``documents``, ``texts``, ``input``,
``inputs``); ``/v1/search`` has none, so its list is an unknown field, which its schema ignores
after the parser has read it. Bodies are written as bytes (a list of millions of items is cheaper
to repeat as text than to dump).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import from_json

from steadyrank.serve.server.http.jsonscan import json_values
from steadyrank.serve.settings import LimitsSettings


@dataclass(frozen=True)
class Route:
    """A route and dialect: ``head`` holds the other fields of a valid request, ``items`` names its
    list, ``count`` the limit on that list (``limits`` attribute), ``shapes`` its error bodies."""

    name: str
    path: str
    head: dict[str, Any]
    items: str
    count: str | None
    shapes: tuple[str, ...]


ROUTES = (
    Route("/v1/rerank", "/v1/rerank", {"query": "q"}, "documents", "max_documents", ("native",)),
    Route("/v2/rerank", "/v2/rerank", {"query": "q"}, "documents", "max_documents", ("native",)),
    # /rerank answers what it refuses before the body's dialect is known (its size, its values) in
    # steadyrank's shape, as every route does before its body is parsed
    Route("/rerank (TEI)", "/rerank", {"query": "q"}, "texts", "max_documents", ("tei", "native")),
    Route("/rerank (Infinity)", "/rerank", {"query": "q"}, "documents", "max_documents", ("native", "tei")),
    Route("/v1/embeddings", "/v1/embeddings", {}, "input", "max_embedding_inputs", ("native",)),
    Route("/embed (TEI)", "/embed", {}, "inputs", "max_embedding_inputs", ("tei",)),
    Route("/v1/search", "/v1/search", {"query": "q"}, "ignored", None, ("native",)),
)
RERANK = ROUTES[0]


@dataclass(frozen=True)
class Case:
    """A body (made when asked: they are large) and what it may be answered: ``expect`` the statuses
    allowed (every one but 500 when empty)."""

    name: str
    make: Callable[[], bytes]
    expect: frozenset[int] = field(default_factory=frozenset)


def listing(route: Route, items: list[bytes] | bytes, count: int = 1, **extra: Any) -> bytes:
    """``route``'s request (its ``head`` and ``extra`` fields) whose list holds ``items`` (JSON texts),
    or ``count`` copies of one."""
    head = json.dumps({**route.head, **extra}).encode()[:-1]
    joined = b",".join(items) if isinstance(items, list) else b",".join([items] * count)
    return head + (b", " if len(head) > 1 else b"") + f'"{route.items}": ['.encode() + joined + b"]}"


def filling(route: Route, item: bytes, size: int, **extra: Any) -> bytes:
    """``route``'s request whose list holds as many copies of ``item`` as fit in ``size`` bytes."""
    overhead = len(listing(route, [], **extra))
    return listing(route, item, max(1, (size - overhead + 1) // (len(item) + 1)), **extra)


def deepest(route: Route, text: bytes = b'"x"') -> bytes:
    """``route``'s request with one item nested in objects as deep as the parser accepts."""
    for depth in range(256, 0, -1):
        body = listing(route, b'{"a":' * depth + text + b"}" * depth)
        try:
            from_json(body)
        except ValueError:
            continue
        return body
    raise AssertionError("no nesting depth parses")


def cases(route: Route, limits: LimitsSettings) -> list[Case]:
    """The worst cases of ``route`` under ``limits``."""
    size, values = limits.max_body_bytes, limits.max_body_values
    count = getattr(limits, route.count) if route.count else None
    out = [
        Case("8 MiB of invalid items 0", lambda: filling(route, b"0", size), frozenset({413})),
        Case("8 MiB of empty objects", lambda: filling(route, b"{}", size), frozenset({413})),
        Case("8 MiB of empty arrays", lambda: filling(route, b"[]", size), frozenset({413})),
        Case("max_body_values + 1 values", lambda: holding(route, values + 1), frozenset({413})),
        Case("max_body_values of invalid items 0", lambda: holding(route, values),
             frozenset({200} if count is None else {413})),
        Case("deepest nesting the parser accepts", lambda: deepest(route)),
        Case("body over max_body_bytes", lambda: filling(route, b'"a"', size + 64), frozenset({413})),
    ]
    if count is not None:
        per_item = min(limits.max_document_chars, (size - 1024) // count - 3)
        out += [
            Case("count limit + 1 items", lambda: listing(route, b'"a"', count + 1), frozenset({413})),
            Case("count limit of invalid items", lambda: listing(route, b"0", count), frozenset({422})),
            Case("count limit of largest items",
                 lambda: listing(route, json.dumps("a " * (per_item // 2)).encode(), count),
                 frozenset({200})),
            Case("one item over max_document_chars",
                 lambda: listing(route, json.dumps("a" * (limits.max_document_chars + 1)).encode()), frozenset({413})),
        ]
    if route.path == "/v1/search":
        out += [
            Case("longest query", lambda: json.dumps({"query": "ty " * (limits.max_query_chars // 3)}).encode(),
                 frozenset({200})),
            Case("query over max_query_chars", lambda: json.dumps({"query": "q" * (limits.max_query_chars + 1)}).encode(),
                 frozenset({413})),
            Case("8 MiB query", lambda: json.dumps({"query": "q" * (size - 64)}).encode(), frozenset({413})),
        ]
    if route is RERANK:
        out += rank_field_cases(limits)
    return out


def holding(route: Route, values: int) -> bytes:
    """``route``'s request holding exactly ``values`` JSON values (:mod:`serve.server.http.jsonscan`), its
    list of ``0`` items (an empty list counts one, as its first item does)."""
    return listing(route, b"0", values - json_values(listing(route, [])) + 1)


def rank_field_cases(limits: LimitsSettings) -> list[Case]:
    """Cohere objects: the most ``rank_fields``, the most keys rendered to YAML, the issue's 1,000
    documents × 760 keys and 100 k ``rank_fields``."""
    fields = limits.max_rank_fields
    docs_within = (limits.max_body_values - fields - 16) // (fields + 1)  # documents of `fields` keys in the budget
    keys = [f"k{i}" for i in range(fields)]
    document = json.dumps({k: "v" for k in keys}).encode()
    wide = json.dumps({f"k{i}": i for i in range(760)}).encode()
    wide_docs = min(1000, (limits.max_body_bytes - 64) // (len(wide) + 1))
    keys_within = limits.max_body_values // 20 - 2
    wide_within = json.dumps({f"k{i}": i for i in range(keys_within)}).encode()
    return [
        Case("most rank_fields × documents within the budget",
             lambda: listing(RERANK, document, docs_within, rank_fields=keys),
             frozenset({200})),
        Case("max_rank_fields + 1 rank_fields", lambda: listing(RERANK, document, 1, rank_fields=[*keys, "extra"]),
             frozenset({413})),
        Case("1,000 documents × 100 k rank_fields",
             lambda: listing(RERANK, b"{}", 1000, rank_fields=[f"f{i}" for i in range(100_000)]),
             frozenset({413})),
        Case("1,000 documents × 8 MiB of rank_fields",  # '"f", ' is 5 bytes
             lambda: listing(RERANK, b"{}", 1000, rank_fields=["f"] * ((limits.max_body_bytes - 4096) // 5)),
             frozenset({413})),
        Case("documents × 760 keys to YAML, as many as the body holds", lambda: listing(RERANK, wide, wide_docs),
             frozenset({413})),
        Case("20 documents × most keys to YAML within the budget", lambda: listing(RERANK, wide_within, 20),
             frozenset({200, 504})),
    ]

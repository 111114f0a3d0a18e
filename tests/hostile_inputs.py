"""Hostile request bodies every JSON route must answer with a JSON 4xx (never a 500, never a
traceback): deeply nested JSON, bad UTF-8, numbers beyond any float or sane int, and a body over
the size limit. Shared by tests/http/test_hostile.py (in process) and the schemathesis check of
tests/schemathesis_hooks.py (against a running server)."""

from __future__ import annotations

#: (name, body): each is refused by every JSON route with a 4xx
HOSTILE_BODIES: list[tuple[str, bytes]] = [
    ("nested", b"[" * 200_000),
    ("nested-field", b'{"query": "q", "documents": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
    ("utf8", b'{"query": "\xff\xfe", "documents": ["a"]}'),
    ("inf", b'{"query": "q", "documents": ["a"], "top_n": 1e999999}'),
    ("bigint", b'{"query": "q", "documents": ["a"], "top_n": ' + b"9" * 5000 + b"}"),
    ("bigint-tei", b'{"query": "q", "texts": ["a"], "raw_scores": ' + b"9" * 5000 + b"}"),
]


def oversized(limit_bytes: int) -> bytes:
    """A well-formed JSON body one byte over ``limit_bytes`` (``limits.max_body_bytes``: 413)."""
    head, tail = b'{"query": "q", "documents": ["', b'"]}'
    return head + b"a" * (limit_bytes + 1 - len(head) - len(tail)) + tail

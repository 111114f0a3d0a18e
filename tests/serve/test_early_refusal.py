"""Refusal before the body is read (``Ingress._refusal``): when the model behind a scoring endpoint
has so much work queued that the documents the request's ``Content-Length`` holds (estimated low
from the recent requests' bytes per document; one without history or size) would be refused, an
authorised request is answered 503 without its body being read; otherwise (room left, a TEI route,
a bad key) the handler decides.

The real ``Ingress`` methods and the real ``WorkQueue`` run against a Starlette request whose body
stream fails if touched; the replica's state is a stand-in holding only what these methods read
(building a whole replica needs models and Ray, and the overload state cannot be reached on the
shared test app, whose work-based admission is off so that its deadline drops stay reachable).
"""

from __future__ import annotations

import types

import pytest
from starlette.requests import Request

from steadyrank.serve.app.admission import WorkQueue
from steadyrank.serve.app.errors import Overloaded
from steadyrank.serve.app.ingress import Ingress
from steadyrank.serve.app.settings import load_settings

REPLICA = Ingress.func_or_class


def replica(pending: int, keys: list[bytes]) -> types.SimpleNamespace:
    """A stand-in replica: the reranker learned 10 documents/s and has ``pending`` documents queued."""
    state = types.SimpleNamespace(draining=False, in_flight=0, keys=keys,
                                  limits=load_settings({"limits": {"request_timeout_s": 30}}).limits)
    queue = WorkQueue(min_units=10, headroom=0.8, half_life_s=1e9)
    queue.start(1, 0.0)
    queue.finish(1, 1.0)  # the first answer ends start-up
    queue.start(100, 1.0)
    queue.finish(100, 11.0)  # 10 documents/s
    queue.start(pending, 11.0)
    state.work = {"reranker": queue, "embedder": WorkQueue()}
    for name in ("_authorize", "_deadline", "_work_refusal"):
        setattr(state, name, types.MethodType(getattr(REPLICA, name), state))
    return state


def request(key: str | None = "k1", size: int | None = None) -> Request:
    """A POST /v1/rerank whose body must not be read; ``size``: its Content-Length."""
    async def receive() -> dict:
        raise AssertionError("the body was read")

    headers = [(b"content-type", b"application/json")] + ([(b"authorization", f"Bearer {key}".encode())] if key else [])
    headers += [(b"content-length", str(size).encode())] if size is not None else []
    return Request({"type": "http", "method": "POST", "path": "/v1/rerank", "headers": headers, "query_string": b""},
                   receive)


def test_a_full_queue_refuses_before_the_body_is_read() -> None:
    state = replica(pending=300, keys=[b"k1"])  # 30 s of work queued > 0.8 × 30 s
    reason, error = REPLICA._refusal(state, "rerank", request())
    assert reason == "overloaded" and type(error) is Overloaded
    assert error.headers["Retry-After"] == "31"  # (300 + 1) / 10 s, rounded up


@pytest.mark.parametrize(("endpoint", "pending", "key"), [
    ("rerank", 200, "k1"),       # 20 s queued: one more document still fits; the handler checks its own size
    ("rerank_tei", 300, "k1"),   # TEI routes answer errors in TEI's shape from their handler
    ("search", 300, "k1"),       # not a single-model route
    ("rerank", 300, "wrong"),    # an unauthorised request gets its 401 from the handler, not a 503
])
def test_otherwise_the_handler_decides(endpoint: str, pending: int, key: str) -> None:
    assert REPLICA._refusal(replica(pending, keys=[b"k1"]), endpoint, request(key)) is None


def test_a_body_too_large_for_the_room_left_is_refused_before_it_is_read() -> None:
    """20 s queued leaves room for 40 documents under 0.8 × 30 s: a 50 kB body, 100 documents at
    the 500 bytes per document of the requests seen, is refused unread; 10 kB (20) goes to its
    handler, as does a body of undeclared size (1 document by the estimate)."""
    state = replica(pending=200, keys=[b"k1"])
    state.work["reranker"].observe_body(50_000, 100)
    reason, error = REPLICA._refusal(state, "rerank", request(size=50_000))
    assert reason == "overloaded" and error.headers["Retry-After"] == "30"  # (200 + 100) / 10 s
    assert REPLICA._refusal(state, "rerank", request(size=10_000)) is None
    assert REPLICA._refusal(state, "rerank", request()) is None

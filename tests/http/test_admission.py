"""Admission in process: refusal before the body is read, the in-flight limit, drain, pacing, and the
repeat of a call whose replica died (issue 31, finding 10).

Refusal before the body: when the model behind a scoring endpoint has so much work queued that the
documents the request's ``Content-Length`` holds (estimated low from the recent requests' bytes per
document; one without history or size) would be refused, an authorised request is answered 503
without its body being read; otherwise (room left, ``/rerank``, a bad key) the route decides. The
request bodies here are generators that record whether they were read.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.http.conftest import KEY, Behaviour, Served, build, metric

pytestmark = pytest.mark.anyio

DOCS = ["alpha", "beta", "gamma"]


def busy(served: Served, pending: int, model: str = "reranker") -> None:
    """The ``model`` learned 10 units/s and has ``pending`` units queued (deadline 30 s)."""
    from steadyrank.serve.server.admission.work_queue import WorkQueue

    queue = WorkQueue(min_units=10, headroom=0.8, half_life_s=1e9)
    queue.start(1, 0.0)
    queue.finish(1, 1.0)  # the first answer ends start-up
    queue.start(100, 1.0)
    queue.finish(100, 11.0)  # 10 documents/s
    queue.start(pending, 11.0)
    served.app.state.parts.gate.work[model] = queue


class Body:
    """A request body that records whether it was read."""

    def __init__(self, data: bytes) -> None:
        self.data, self.read = data, False

    async def __aiter__(self):
        self.read = True
        yield self.data


async def post(served: Served, path: str, size: int | None = None, key: str = KEY):
    body = Body(b'{"query": "q", "documents": ["alpha", "beta"]}')
    headers = {"content-type": "application/json"}
    if size is not None:
        headers["content-length"] = str(size)
    async with served.client(key) as c:
        r = await c.post(path, content=body, headers=headers)
    return r, body.read


@pytest.fixture
def slow() -> Served:
    return build({"limits": {"request_timeout_s": 30}})


async def test_a_full_queue_refuses_before_the_body_is_read(slow) -> None:
    busy(slow, 300)  # 30 s of work queued > 0.8 × 30 s
    r, read = await post(slow, "/v1/rerank")
    assert r.status_code == 503 and not read
    assert r.headers["retry-after"] == "31"  # (300 + 1) / 10 s, rounded up
    assert r.json()["error"]["type"] == "overloaded_error"
    assert metric(slow, "steadyrank_requests_dropped_total", deployment="ingress", reason="overloaded") == 1


@pytest.mark.parametrize(("path", "pending", "key", "status", "read"), [
    ("/v1/rerank", 200, KEY, 200, True),       # 20 s queued: one more document still fits
    ("/rerank", 300, KEY, 503, True),          # its error shape is known only from its body: refused after
    ("/v1/search", 300, KEY, 200, True),       # the embedded default's search reranks from stored vectors
    ("/v1/rerank", 300, "wrong", 401, False),  # an unauthorised request gets its 401, not a 503
])
async def test_otherwise_the_route_decides(slow, path, pending, key, status, read) -> None:
    busy(slow, pending)
    r, was_read = await post(slow, path, key=key)
    assert r.status_code == status and was_read == read


#: A primary reranker that is not the embedder: a search reranks its candidates with it.
CROSS_ENCODER = {"reranker": {"path": "cross-encoder/ms-marco-MiniLM-L-6-v2"}}


@pytest.mark.parametrize(("overrides", "model", "units"), [
    (CROSS_ENCODER, "reranker", 50),  # routing.k_low candidates: every search reranks at least these
    ({}, "embedder", 1),              # the reranker scores stored vectors: only the query is embedded
])
async def test_a_search_is_admitted_by_the_work_it_loads_before_its_body_is_read(overrides, model, units) -> None:
    """A search loads the primary reranker (or, reranking from stored vectors, the embedder) like a
    rerank does: with that model's queue full it is refused unread, its Retry-After the wait for
    the queued work and its own; with the other model busy it goes through."""
    served = build({"limits": {"request_timeout_s": 30}, **overrides})
    busy(served, 300, "embedder" if model == "reranker" else "reranker")
    ok, _ = await post(served, "/v1/search")
    busy(served, 300, model)
    refused, read = await post(served, "/v1/search")
    assert ok.status_code == 200 and refused.status_code == 503 and not read
    assert refused.headers["retry-after"] == str(-(-(300 + units) // 10))
    assert f"the {model} has about" in refused.json()["error"]["message"]


async def test_a_search_counts_the_candidates_it_reranked_in_the_rate() -> None:
    """Admitted as ``k_low`` = 50 units, a search that reranked ``meta.k`` = 2 candidates adds 2 to
    the reranker's finished work, not 50 (the rate would otherwise be 25 times too high), and its
    50 pending units leave the queue when it answers."""
    served = build(CROSS_ENCODER)
    queue = served.app.state.parts.gate.work["reranker"]
    async with served.client() as c:
        for _ in range(3):  # the first answer ends start-up and is not counted
            assert (await c.post("/v1/search", json={"query": "q"})).status_code == 200
    assert queue.pending == 0 and queue.finished_total == 2 * 2


async def test_a_body_too_large_for_the_room_left_is_refused_before_it_is_read(slow) -> None:
    """20 s queued leaves room for 40 documents under 0.8 × 30 s: a 50 kB body, 100 documents at
    the 500 bytes per document of the requests seen, is refused unread."""
    busy(slow, 200)
    slow.app.state.parts.gate.work["reranker"].observe_body(50_000, 100)
    r, read = await post(slow, "/v1/rerank", size=50_000)
    assert r.status_code == 503 and not read and r.headers["retry-after"] == "30"  # (200 + 100) / 10 s


async def test_the_in_flight_limit_counts_requests_whose_body_was_read(served) -> None:
    served.reranker.behaviour.hold = asyncio.Event()
    async with served.client() as c:
        held = [asyncio.create_task(c.post("/v1/rerank", json={"query": "q", "documents": DOCS})) for _ in range(4)]
        while served.app.state.parts.gate.in_flight < 4:
            await asyncio.sleep(0.01)
        assert metric(served, "steadyrank_in_flight_requests") == 4
        assert metric(served, "steadyrank_queued_work_units", model="reranker") == 12
        refused = await c.post("/v1/rerank", json={"query": "q", "documents": DOCS})
        served.reranker.behaviour.hold.set()
        done = await asyncio.gather(*held)
    assert refused.status_code == 503 and "at capacity" in refused.json()["error"]["message"]
    assert [r.status_code for r in done] == [200] * 4 and served.app.state.parts.gate.in_flight == 0


async def test_a_draining_server_refuses_new_work_with_retry_after(served) -> None:
    served.app.state.parts.gate.draining = True
    async with served.client() as c:
        r = await c.post("/v1/rerank", json={"query": "q", "documents": DOCS})
        ready = await c.get("/readyz")
    assert r.status_code == 503 and r.json()["error"]["type"] == "unavailable_error" and r.headers["retry-after"] == "2"
    assert ready.status_code == 503 and ready.json()["status"] == "draining"


async def test_overload_refusals_are_paced() -> None:
    served = build({"admission": {"refusals_per_s": 20, "max_in_flight": 1}})
    served.app.state.parts.gate.in_flight = 1  # full
    loop = asyncio.get_running_loop()
    async with served.client() as c:
        started = loop.time()
        codes = [r.status_code for r in await asyncio.gather(
            *(c.post("/v1/rerank", json={"query": "q", "documents": DOCS}) for _ in range(5)))]
        elapsed = loop.time() - started
    assert codes == [503] * 5 and elapsed >= 0.19  # the 5th waits 4 × 1/20 s


# -- finding 10: a call whose replica died is made again on a live one -------------------------------

@pytest.mark.parametrize("path", ["/v1/rerank", "/v1/embeddings", "/v1/search"])
async def test_a_call_on_a_dead_replica_is_retried_within_its_deadline(served, path) -> None:
    from ray.exceptions import ActorDiedError, ActorUnavailableError, ObjectReconstructionFailedError

    body = {"/v1/rerank": {"query": "q", "documents": DOCS}, "/v1/embeddings": {"input": "a"},
            "/v1/search": {"query": "q"}}[path]
    fake = {"/v1/rerank": served.reranker, "/v1/embeddings": served.embedder, "/v1/search": served.searcher}[path]
    errors = [ActorDiedError(), ActorUnavailableError("node gone", None),
              ObjectReconstructionFailedError("ab" * 14)]  # the answer was lost with its node

    async def die_then_live(*args):
        fake.behaviour.raises = errors.pop(0) if errors else None

    original = fake.behaviour.act

    async def act(*args):
        await die_then_live()
        await original(*args)

    fake.behaviour.act = act
    async with served.client() as c:
        r = await c.post(path, json=body)
    assert r.status_code == 200, r.text
    assert metric(served, "steadyrank_request_retries_total", reason="replica_lost") == 3


# -- the work queue: an admitted request's units leave it exactly once, however it ends ---------------

def held_units(served: Served) -> int:
    return served.app.state.parts.gate.work["reranker"].pending


@pytest.mark.parametrize("ending", ["deadline", "replica_error", "bug", "client_gone"])
async def test_an_admitted_request_releases_its_units_exactly_once_when_the_model_is_done(ending) -> None:
    """One request of 2 documents stays held at the reranker (2 units pending) while another of 3
    documents ends badly: a 504 at its deadline, a domain error from the replica, a bug (500), or
    its client going away. Its 3 units leave the queue once, and only when the model is done with
    them: after the 504 the model call runs on (a started batch is still computed; the replica drops
    a queued job at its deadline), so the units stay until that call ends (before: they left at
    the 504, and the queue under-counted the model's work); on a client going away the call is
    cancelled (a queued job is dropped) and the units leave at once. The held request's 2 units
    stay throughout (a second release would take them too), and once it answers the queue is empty:
    no estimate drifts, and later requests come and go."""
    from steadyrank.serve.errors import InputTooLongError

    served = build({"limits": {"request_timeout_s": 30}})
    release_first, model_done, first = asyncio.Event(), asyncio.Event(), asyncio.Event()
    cancelled = []
    fails = {"replica_error": InputTooLongError("too long at the replica"), "bug": RuntimeError("boom")}.get(ending)

    async def act(*args):  # the first call is held until released; the second ends as `ending` says
        if not first.is_set():
            first.set()
            await release_first.wait()
            return
        if fails is not None:
            raise fails
        try:
            await model_done.wait()  # the model still works on it past its deadline
        except asyncio.CancelledError:
            cancelled.append(args)
            raise

    served.reranker.behaviour.act = act
    async with served.client() as c:
        held = asyncio.create_task(c.post("/v1/rerank", json={"query": "q", "documents": DOCS[:2]}))
        await first.wait()
        assert held_units(served) == 2
        headers = {"X-Request-Timeout": "0.2"} if ending == "deadline" else {}
        bad = asyncio.create_task(c.post("/v1/rerank", json={"query": "q", "documents": DOCS}, headers=headers))
        if fails is None:  # it waits at the reranker: 5 units pending
            while held_units(served) < 5:
                await asyncio.sleep(0.01)
        if ending == "client_gone":
            bad.cancel()
        (outcome,) = await asyncio.gather(bad, return_exceptions=True)
        status = None if isinstance(outcome, BaseException) else outcome.status_code
        assert status == {"deadline": 504, "replica_error": 413, "bug": 500, "client_gone": None}[ending]
        if ending == "deadline":
            assert held_units(served) == 5, "the units left at the 504 while the model still had the work"
            model_done.set()
            while held_units(served) > 2:
                await asyncio.sleep(0.01)
        assert held_units(served) == 2, f"{ending}: the other request's units were released too"
        assert len(cancelled) == (ending == "client_gone")
        release_first.set()
        assert (await held).status_code == 200
        assert held_units(served) == 0
        assert metric(served, "steadyrank_queued_work_units", model="reranker") == 0
        served.reranker.behaviour.act = Behaviour().act
        for _ in range(3):  # nothing left behind: more requests come and go
            assert (await c.post("/v1/rerank", json={"query": "q", "documents": DOCS})).status_code == 200
    assert held_units(served) == 0

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

from tests.http.conftest import KEY, Served, build, metric

pytestmark = pytest.mark.anyio

DOCS = ["alpha", "beta", "gamma"]


def busy(served: Served, pending: int) -> None:
    """The reranker learned 10 documents/s and has ``pending`` documents queued (deadline 30 s)."""
    from steadyrank.serve.app.admission import WorkQueue

    queue = WorkQueue(min_units=10, headroom=0.8, half_life_s=1e9)
    queue.start(1, 0.0)
    queue.finish(1, 1.0)  # the first answer ends start-up
    queue.start(100, 1.0)
    queue.finish(100, 11.0)  # 10 documents/s
    queue.start(pending, 11.0)
    served.app.state.gate.work["reranker"] = queue


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
    ("/v1/search", 300, KEY, 200, True),       # not a single-model route
    ("/v1/rerank", 300, "wrong", 401, False),  # an unauthorised request gets its 401, not a 503
])
async def test_otherwise_the_route_decides(slow, path, pending, key, status, read) -> None:
    busy(slow, pending)
    r, was_read = await post(slow, path, key=key)
    assert r.status_code == status and was_read == read


async def test_a_body_too_large_for_the_room_left_is_refused_before_it_is_read(slow) -> None:
    """20 s queued leaves room for 40 documents under 0.8 × 30 s: a 50 kB body, 100 documents at
    the 500 bytes per document of the requests seen, is refused unread."""
    busy(slow, 200)
    slow.app.state.gate.bodies["reranker"].observe(50_000, 100)
    r, read = await post(slow, "/v1/rerank", size=50_000)
    assert r.status_code == 503 and not read and r.headers["retry-after"] == "30"  # (200 + 100) / 10 s


async def test_the_in_flight_limit_counts_requests_whose_body_was_read(served) -> None:
    served.reranker.behaviour.hold = asyncio.Event()
    async with served.client() as c:
        held = [asyncio.create_task(c.post("/v1/rerank", json={"query": "q", "documents": DOCS})) for _ in range(4)]
        while served.app.state.gate.in_flight < 4:
            await asyncio.sleep(0.01)
        assert metric(served, "steadyrank_in_flight_requests") == 4
        refused = await c.post("/v1/rerank", json={"query": "q", "documents": DOCS})
        served.reranker.behaviour.hold.set()
        done = await asyncio.gather(*held)
    assert refused.status_code == 503 and "at capacity" in refused.json()["error"]["message"]
    assert [r.status_code for r in done] == [200] * 4 and served.app.state.gate.in_flight == 0


async def test_a_draining_server_refuses_new_work_with_retry_after(served) -> None:
    served.app.state.gate.draining = True
    async with served.client() as c:
        r = await c.post("/v1/rerank", json={"query": "q", "documents": DOCS})
        ready = await c.get("/readyz")
    assert r.status_code == 503 and r.json()["error"]["type"] == "unavailable_error" and r.headers["retry-after"] == "2"
    assert ready.status_code == 503 and ready.json()["status"] == "draining"


async def test_overload_refusals_are_paced() -> None:
    served = build({"limits": {"refusals_per_s": 20, "max_in_flight": 1}})
    served.app.state.gate.in_flight = 1  # full
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


# -- the model admits its own work; the ingress refuses early from its view of it -----------------

async def test_the_split_ingress_refuses_from_what_the_model_replicas_publish() -> None:
    """In the split layout the ingress has no queue of its own: it asks the reranker replicas'
    ``admission()`` in the background (every ``refresh_s``) and refuses from their sum. The first
    request finds nothing published and is admitted (the model admits it itself); once the busy
    state has arrived, the next is refused at the ingress, before the model is called."""
    from steadyrank.serve.app.admission import WorkQueue

    served = build({"limits": {"request_timeout_s": 30}})
    busy_replica = WorkQueue(min_units=10, half_life_s=1e9)
    busy_replica.start(1, 0.0)
    busy_replica.finish(1, 1.0)
    busy_replica.start(100, 1.0)
    busy_replica.finish(100, 11.0)  # 10 documents/s
    busy_replica.start(300, 11.0)  # 30 s of work queued > 0.8 × 30 s
    asked = []

    async def admission() -> dict:
        asked.append(1)
        return {"replica": "r1", **busy_replica.published()}

    served.reranker.admission = admission  # pyright: ignore[reportAttributeAccessIssue]
    body = {"query": "q", "documents": DOCS}
    async with served.client() as c:
        assert (await c.post("/v1/rerank", json=body)).status_code == 200
        await asyncio.sleep(0.05)  # the background ask answers
        refused = await c.post("/v1/rerank", json=body)
    assert asked and refused.status_code == 503 and refused.headers["retry-after"] == "31"  # (300 + 3 + …) / 10 s
    assert len(served.reranker.behaviour.calls) == 1, "the refused request reached the model"
    assert metric(served, "steadyrank_requests_dropped_total", deployment="ingress", reason="overloaded") == 1


@pytest.mark.parametrize("ending", ["deadline", "client_gone"])
async def test_after_a_504_the_model_call_runs_on_and_a_client_gone_cancels_it(ending) -> None:
    """A 504 does not take the work from the model: the call runs on, detached and counted by
    ``drain`` (``gateway.background``), until the model is done with it (it drops a queued job at
    the deadline it was given). A client that goes away cancels the call, so a job still queued at
    the model is dropped at once."""
    served = build({"limits": {"request_timeout_s": 30}})
    model_done, reached = asyncio.Event(), asyncio.Event()
    cancelled = []

    async def act(*args):
        reached.set()
        try:
            await model_done.wait()
        except asyncio.CancelledError:
            cancelled.append(args)
            raise

    served.reranker.behaviour.act = act
    gateway = served.app.state.gateway
    async with served.client() as c:
        headers = {"X-Request-Timeout": "0.2"} if ending == "deadline" else {}
        call = asyncio.create_task(c.post("/v1/rerank", json={"query": "q", "documents": DOCS}, headers=headers))
        await reached.wait()
        if ending == "client_gone":
            call.cancel()
        (outcome,) = await asyncio.gather(call, return_exceptions=True)
        if ending == "deadline":
            assert outcome.status_code == 504 and len(gateway.background) == 1 and not cancelled
            model_done.set()
            while gateway.background:
                await asyncio.sleep(0.01)
        else:
            while not cancelled:
                await asyncio.sleep(0.01)
            assert not gateway.background
    assert len(cancelled) == (ending == "client_gone")

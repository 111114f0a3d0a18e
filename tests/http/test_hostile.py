"""Hostile and slow clients (issue 31, findings 4, 5 and 9), in process or against a real uvicorn
on 127.0.0.1 serving the app built around the stand-ins of conftest.py."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time

import pytest

from tests.hostile_inputs import HOSTILE_BODIES, oversized
from tests.http.conftest import KEY, Uvicorn, build

pytestmark = pytest.mark.anyio


# -- finding 4: every count and size limit before any per-document work ------------------------------

async def test_object_documents_are_counted_before_any_is_rendered(served, monkeypatch) -> None:
    import yaml

    rendered = []
    real = yaml.safe_dump
    monkeypatch.setattr(yaml, "safe_dump", lambda *a, **k: rendered.append(threading.get_ident()) or real(*a, **k))
    async with served.client() as c:
        r = await c.post("/v1/rerank", json={"query": "q", "documents": [{"a": 1}] * 51})
        assert r.status_code == 413 and rendered == []
        ok = await c.post("/v1/rerank", json={"query": "q", "documents": [{"a": 1}, {"b": 2}]})
    assert ok.status_code == 200 and len(rendered) == 2
    assert threading.get_ident() not in rendered, "documents were rendered on the event loop's thread"
    assert served.reranker.behaviour.calls[0][1] == ["a: 1\n", "b: 2\n"]


async def test_v2_limits_are_checked_before_max_tokens_per_doc_tokenises(served, monkeypatch) -> None:
    cuts = []
    monkeypatch.setattr(served.services.reranker_tokens, "cut", lambda texts, n: cuts.append(len(texts)) or (texts, []))
    async with served.client() as c:
        many = await c.post("/v2/rerank", json={"query": "q", "documents": ["x"] * 51, "max_tokens_per_doc": 2})
        long = await c.post("/v2/rerank", json={"query": "q", "documents": ["x" * 201], "max_tokens_per_doc": 2})
        fine = await c.post("/v2/rerank", json={"query": "q", "documents": ["x y z"], "max_tokens_per_doc": 2})
    assert (many.status_code, long.status_code, fine.status_code) == (413, 413, 200)
    assert cuts == [1]


# -- finding 9 (input side): nested JSON, bad UTF-8, giant numbers, oversized -> JSON 4xx -------------

@pytest.mark.parametrize("path", ["/v1/rerank", "/rerank", "/v2/rerank", "/embed", "/v1/search"])
@pytest.mark.parametrize("body", [body for _, body in HOSTILE_BODIES] + [oversized(64 * 1024)],
                         ids=[name for name, _ in HOSTILE_BODIES] + ["oversized"])
async def test_hostile_json_is_a_json_4xx(served, caplog, path, body) -> None:
    async with served.client() as c:
        r = await c.post(path, content=body, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500, r.text[:300]
    assert r.headers["content-type"].startswith("application/json")
    assert not [rec for rec in caplog.records if rec.exc_info], "a client's bad JSON logged a traceback"


# -- finding 9 (output side): no internal text, request ids, quiet logs, timeouts ------------------------

async def test_a_bug_is_a_json_500_with_the_request_id_and_no_internal_text(served, caplog) -> None:
    served.reranker.behaviour.raises = RuntimeError("/secret/model/path exploded")
    with caplog.at_level(logging.ERROR, logger="steadyrank"):
        async with served.client() as c:
            r = await c.post("/v1/rerank", json={"query": "q", "documents": ["a"]}, headers={"X-Request-Id": "bug-1"})
            tei = await c.post("/embed", json={"inputs": "a"})  # healthy
            served.embedder.behaviour.raises = KeyError("hidden-key-name")
            tei_bug = await c.post("/embed", json={"inputs": "a"})
    assert r.status_code == 500 and "secret" not in r.text and "RuntimeError" not in r.text
    assert r.json()["error"] == {"type": "internal_error", "message": r.json()["error"]["message"], "request_id": "bug-1"}
    assert tei.status_code == 200
    assert tei_bug.status_code == 500 and tei_bug.json()["error_type"] == "backend" and "hidden-key-name" not in tei_bug.text
    logged = [rec for rec in caplog.records if rec.exc_info]
    assert len(logged) == 2 and getattr(logged[0], "request_id", None) in (None, "bug-1")


async def test_readyz_tells_an_anonymous_caller_only_its_status(served) -> None:
    async with served.client(None) as anon, served.client(KEY) as keyed:
        a = await anon.get("/readyz")
        k = await keyed.get("/readyz")
    assert a.status_code == k.status_code == 200
    assert a.json() == {"status": "ready", "checks": {}} and "/secret/index/path" not in a.text
    assert k.json()["checks"]["retriever"]["path"] == "/secret/index/path"


async def test_readyz_failure_hides_the_exception_text(served) -> None:
    served.searcher.behaviour.raises = RuntimeError("/secret/index/path is gone")
    async with served.client(KEY) as c:
        r = await c.get("/readyz")
    assert r.status_code == 503 and r.json()["status"] == "not_ready" and "secret" not in r.text


async def test_readyz_fan_out_is_cached_briefly(served) -> None:
    async with served.client(None) as c:
        await asyncio.gather(*(c.get("/readyz") for _ in range(20)))
    assert len(served.searcher.behaviour.calls) == 1


async def test_unknown_paths_are_not_logged_decoded_at_warning(served, caplog) -> None:
    with caplog.at_level(logging.DEBUG, logger="steadyrank"):
        async with served.client() as c:
            r = await c.get("/v1/x%0a2026-01-01 ERROR forged line")
            m = await c.get("/v1/rerank")
    assert r.status_code == 404 and m.status_code == 405
    assert r.json()["error"]["request_id"] == r.headers["x-request-id"]
    assert not [rec for rec in caplog.records if rec.levelno >= logging.WARNING]
    assert all("\n" not in rec.getMessage() for rec in caplog.records)


async def test_metrics_and_model_facts_awaits_time_out(served, monkeypatch) -> None:
    from steadyrank.serve.server.http import gateway
    from steadyrank.serve.server.http.routers import health

    monkeypatch.setattr(gateway, "SIDE_CALL_TIMEOUT_S", 0.2)
    monkeypatch.setattr(health, "SIDE_CALL_TIMEOUT_S", 0.2)
    never = asyncio.Event()

    async def hang(*_a, **_k):
        await never.wait()

    monkeypatch.setattr(served.hub, "render", hang)
    monkeypatch.setattr(served.reranker, "info", hang)
    async with served.client() as c:
        started = time.monotonic()
        metrics = await c.get("/metrics")
        models = await c.get("/v1/models")
    assert metrics.status_code == 504 and models.status_code == 504
    assert time.monotonic() - started < 5


async def test_a_hanging_mirror_is_dropped_after_its_timeout(served, monkeypatch) -> None:
    from steadyrank.serve.server.http import gateway

    monkeypatch.setattr(gateway, "SIDE_CALL_TIMEOUT_S", 0.1)
    never = asyncio.Event()

    async def hang(event):
        await never.wait()

    monkeypatch.setattr(served.evaluator, "mirror", hang)
    async with served.client() as c:
        assert (await c.post("/v1/search", json={"query": "q"})).status_code == 200
    background = served.app.state.parts.gateway.background
    assert len(background) == 1
    for _ in range(3000):  # dropped at its 0.1 s timeout: wait for it (at most 30 s)
        if not background:
            break
        await asyncio.sleep(0.01)
    assert len(background) == 0


# -- finding 5: a slowly sent body holds no slot and is cut at the read deadline ----------------------

def _slow_sender(port: int, stop: threading.Event, answers: list[bytes]) -> None:
    """Sends a rerank request's headers and then its body one byte every 0.3 s, until ``stop`` or
    until the server answers."""
    body = b'{"query": "q", "documents": ["' + b"a" * 200 + b'"]}'
    with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
        s.sendall(b"POST /v1/rerank HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Authorization: Bearer " + KEY.encode() + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        s.settimeout(0.3)
        for byte in body:
            if stop.is_set():
                break
            try:
                s.sendall(bytes([byte]))
                answer = s.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                break
            answers.append(answer)
            return
        answers.append(b"")


@pytest.mark.parametrize("slow", [64])
def test_slowloris_senders_hold_no_slot_and_are_cut_at_the_read_deadline(slow: int) -> None:
    """64 connections trickling their bodies one byte per 0.3 s: with 4 in-flight slots, every
    other client's request is still served (before: each trickling body held a slot, and the others
    got 503 "at capacity"); at the 2 s read deadline each slow sender gets a 408."""
    import httpx

    served = build({"limits": {"body_timeout_s": 2.0}, "admission": {"max_in_flight": 4}})
    stop = threading.Event()
    answers: list[bytes] = []
    uvicorn = Uvicorn(served.app)
    with uvicorn as port:
        senders = [threading.Thread(target=_slow_sender, args=(port, stop, answers)) for _ in range(slow)]
        for t in senders:
            t.start()
        connections = uvicorn.server.server_state.connections
        deadline = time.monotonic() + 60  # every slow sender's connection is accepted (and trickling)
        while len(connections) < slow:
            assert time.monotonic() < deadline, f"{len(connections)} of {slow} senders connected"
            time.sleep(0.05)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {KEY}"},
                          timeout=10) as client:
            codes = [client.post("/v1/rerank", json={"query": "q", "documents": ["a", "b"]}).status_code
                     for _ in range(20)]
        for t in senders:
            t.join(timeout=10)
        stop.set()
    assert codes == [200] * 20
    assert len(answers) == slow
    assert all(a.startswith(b"HTTP/1.1 408") for a in answers), {a[:20] for a in answers}

"""Load shedding and deadlines on the real app: a request beyond the ingress' capacity is refused
with steadyrank's JSON 503 + Retry-After, costs no model compute, and a burst of refusals is paced
(``admission.refusals_per_s``); a request whose deadline
passes (or whose client goes away) while it waits for the Reranker is dropped before its forward
pass, counted in ``steadyrank_requests_dropped_total``, and answered 504 (deadline)."""

from __future__ import annotations

import asyncio
import threading

import httpx

from tests.serve.conftest import ServeApp, wait_until

DOCS = [f"disk usage report {i}: du and df disagree after deleting a large open log file" for i in range(250)]


def _value(metrics: dict, name: str, **labels: str) -> float:
    return metrics.get((name, tuple(sorted(labels.items()))), 0.0)


def _reranked_count(metrics: dict) -> float:
    return _value(metrics, "steadyrank_candidates_reranked_count")


def _auth(app: ServeApp) -> dict[str, str]:
    return {"Authorization": f"Bearer {app.api_key}"}


def test_beyond_capacity_is_refused_at_once_before_compute(serve_app: ServeApp, metrics_text) -> None:
    limit = serve_app.settings.admission.max_in_flight
    before = metrics_text()

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=serve_app.url, timeout=300, headers=_auth(serve_app)) as c:
            return await asyncio.gather(*[
                c.post("/v1/rerank", json={"query": f"disk full {i}", "documents": DOCS[:40], "top_n": 3})
                for i in range(3 * limit)
            ])

    responses = asyncio.run(burst())
    codes = [r.status_code for r in responses]
    assert set(codes) <= {200, 503} and 200 in codes and codes.count(503) >= limit, codes
    refused = [r for r in responses if r.status_code == 503]
    assert all(r.headers["content-type"].startswith("application/json") for r in refused)
    assert all(r.headers["retry-after"] == "2" and r.json()["error"]["type"] == "overloaded_error" for r in refused)
    # paced (admission.refusals_per_s): the burst's refusals leave 1/rate s apart, not all at once
    rate = serve_app.settings.admission.refusals_per_s
    answered = sorted(r.elapsed.total_seconds() for r in refused)
    assert answered[-1] - answered[0] >= 0.5 * (len(refused) - 1) / rate, answered
    ok = codes.count(200)

    def shed_since_before(m: dict) -> float:
        return (_value(m, "steadyrank_requests_dropped_total", deployment="ingress", reason="overloaded")
                - _value(before, "steadyrank_requests_dropped_total", deployment="ingress", reason="overloaded"))

    def settled() -> dict | None:
        # the Reranker's and the ingress' series are flushed independently: wait for both
        m = metrics_text()
        return m if _reranked_count(m) - _reranked_count(before) >= ok and shed_since_before(m) >= 1 else None

    after = wait_until(settled, 30) or metrics_text()
    assert _reranked_count(after) - _reranked_count(before) == ok  # refused requests cost no forward pass
    assert 1 <= shed_since_before(after) <= len(refused)


def _occupy_reranker(app: ServeApp, metrics_text) -> threading.Thread:
    """A long rerank (250 documents) that holds the Reranker's compute thread for a while; returns
    once it has reached the Reranker (the ingress holds its 250 work units and the Reranker started
    a batch since: its metrics, flushed every 0.2 s)."""
    batches = ("steadyrank_batch_size_count", (("deployment", "reranker"),))
    before = metrics_text().get(batches, 0.0)

    def run() -> None:
        with httpx.Client(base_url=app.url, timeout=300, headers=_auth(app)) as c:
            assert c.post("/v1/rerank", json={"query": "slow", "documents": DOCS}).status_code == 200

    def reached() -> bool:
        m = metrics_text()
        return (_value(m, "steadyrank_queued_work_units", model="reranker") >= len(DOCS)
                and m.get(batches, 0.0) > before)

    thread = threading.Thread(target=run)
    thread.start()
    assert wait_until(reached, 60, step_s=0.05), "the long rerank did not reach the Reranker"
    return thread


def _dropped(metrics: dict) -> float:
    """Requests dropped for their deadline or a gone client, before any forward pass: by the
    Reranker, or already by the ingress when the request expired while it waited there for the work
    units the long rerank holds (which of the two depends on timing; either spends no forward pass,
    which ``_reranked_count`` checks)."""
    return sum(_value(metrics, "steadyrank_requests_dropped_total", deployment=d, reason=r)
               for d in ("ingress", "reranker") for r in ("deadline", "disconnected"))


def _more_dropped(metrics_text, before: dict) -> dict | None:
    """The metrics once the reranker counted a drop beyond ``before`` and the long request's
    ranking (polled: replicas flush their metrics every 0.2 s)."""

    def check() -> dict | None:
        m = metrics_text()
        return m if _dropped(m) > _dropped(before) and _reranked_count(m) > _reranked_count(before) else None

    return wait_until(check, 30)


def test_expired_request_is_dropped_before_its_forward_pass(serve_app: ServeApp, client: httpx.Client,
                                                            metrics_text) -> None:
    before = metrics_text()
    busy = _occupy_reranker(serve_app, metrics_text)
    late = client.post("/v1/rerank", json={"query": "late", "documents": DOCS[:5]}, headers={"X-Request-Timeout": "0.2"})
    busy.join()
    assert late.status_code == 504 and late.json()["error"]["type"] == "timeout_error"
    after = _more_dropped(metrics_text, before)
    assert after is not None, "the expired request was not counted as dropped"
    assert _reranked_count(after) - _reranked_count(before) == 1  # only the long request was scored


def test_disconnected_client_is_dropped_before_its_forward_pass(serve_app: ServeApp, metrics_text) -> None:
    before = metrics_text()
    busy = _occupy_reranker(serve_app, metrics_text)
    with httpx.Client(base_url=serve_app.url, timeout=0.3, headers=_auth(serve_app)) as c:
        try:
            c.post("/v1/rerank", json={"query": "gone", "documents": DOCS[:5]})
        except httpx.TimeoutException:
            pass  # the client gave up and closed the connection
    busy.join()
    after = _more_dropped(metrics_text, before)
    assert after is not None, "the abandoned request was not counted as dropped"
    assert _reranked_count(after) - _reranked_count(before) == 1

"""Ray Serve's HTTP proxy answers its own failures as steadyrank's JSON 503 with ``Retry-After``
(serve/server/hosting/proxy_errors.py), and leaves every answer of the application as it is.

The proxy itself needs a Serve controller, so the app inside the middleware here is a stand-in
for its request path that answers the way the real one does: the exception a proxy meets is
turned into what it sends by Ray's own functions (``get_http_response_status``,
``send_http_response_on_exception``), which is nothing at all for a lost replica (uvicorn then
answers a plain-text 500: what the two-node test saw before the fix) and a plain-text 503 for
a deployment without replicas or a full queue. The end-to-end case, a node killed under load, is
``tests/cluster/test_two_nodes.py::test_worker_node_lost_under_load``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import pytest
from ray.exceptions import ActorDiedError, ActorUnavailableError
from ray.serve._private.common import DeploymentID
from ray.serve._private.http_util import get_http_response_status, send_http_response_on_exception
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from steadyrank.serve.server.hosting.proxy_errors import RETRY_AFTER_S, ProxyErrors, middlewares
from steadyrank.serve.settings import LimitsSettings


def proxy_meeting(exc: BaseException) -> Callable[[Scope, Receive, Send], object]:
    """An ASGI app that answers as Ray Serve's proxy does when its call to the replica raised ``exc``."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        status = get_http_response_status(exc, None, "ray-request-id")
        for message in send_http_response_on_exception(status, response_started=False):
            await send(message)

    return app


def ask(app: Callable[[Scope, Receive, Send], object], path: str = "/v1/search", **headers: str) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=ProxyErrors(app))  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
            return await client.post(path, json={"query": "q"}, headers=headers)

    return asyncio.run(go())


LOST = [ActorUnavailableError("The actor is temporarily unavailable: RpcError: Socket closed", None),
        ActorDiedError()]


@pytest.mark.parametrize("lost", LOST, ids=["unavailable", "died"])
def test_a_request_lost_with_its_replica_is_a_json_503_with_retry_after(lost: BaseException) -> None:
    assert send_http_response_on_exception(get_http_response_status(lost, None, "r"), False) == []  # Ray: nothing
    response = ask(proxy_meeting(lost), **{"X-Request-Id": "client-42"})
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/json"
    assert response.headers["retry-after"] == str(RETRY_AFTER_S)
    error = response.json()["error"]
    assert error["type"] == "unavailable_error" and "retry" in error["message"]
    assert error["request_id"] == response.headers["x-request-id"] == "client-42"


def test_rays_plain_text_503s_become_json_and_keep_their_retry_after() -> None:
    unavailable = ask(proxy_meeting(DeploymentUnavailableError(DeploymentID(name="Ingress", app_name="steadyrank"))))
    assert unavailable.status_code == 503 and unavailable.headers["retry-after"] == str(RETRY_AFTER_S)
    assert "Ingress" in unavailable.json()["error"]["message"]
    full = ask(proxy_meeting(BackPressureError(num_queued_requests=9, max_queued_requests=8, retry_after_s=7)))
    assert full.status_code == 503 and full.headers["retry-after"] == "7"
    assert full.json()["error"]["type"] == "unavailable_error"


def test_a_hostile_request_id_is_not_echoed() -> None:
    response = ask(proxy_meeting(LOST[0]), **{"X-Request-Id": "x" * 500})
    assert len(response.json()["error"]["request_id"]) == 32


def test_the_applications_answers_pass_untouched() -> None:
    """JSON errors (503 included), a 200 in plain text (/metrics), a client's 4xx: byte for byte."""

    def app_answers() -> Starlette:
        async def busy(_):  # noqa: ANN001, ANN202
            return JSONResponse({"error": {"type": "overloaded_error"}}, status_code=503, headers={"Retry-After": "3"})

        async def metrics(_):  # noqa: ANN001, ANN202
            return PlainTextResponse("steadyrank_requests_total 1\n")

        async def bug(_):  # noqa: ANN001, ANN202
            return JSONResponse({"error": {"type": "internal_error"}}, status_code=500)

        return Starlette(routes=[Route("/busy", busy, methods=["POST"]), Route("/metrics", metrics, methods=["POST"]),
                                 Route("/bug", bug, methods=["POST"])])

    app = app_answers()
    busy = ask(app, "/busy")
    assert (busy.status_code, busy.headers["retry-after"], busy.json()) == (503, "3", {"error": {"type": "overloaded_error"}})
    metrics = ask(app, "/metrics")
    assert (metrics.status_code, metrics.text) == (200, "steadyrank_requests_total 1\n")
    assert ask(app, "/bug").json() == {"error": {"type": "internal_error"}}
    assert ask(app, "/nowhere").status_code == 404


def test_the_retry_after_is_the_default_of_the_setting() -> None:
    assert RETRY_AFTER_S == LimitsSettings().retry_after_s
    assert [m.cls for m in middlewares()] == [ProxyErrors]

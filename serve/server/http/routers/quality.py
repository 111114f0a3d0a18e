"""The shadow evaluator's reports: ``GET /v1/canary`` (canary comparison) and ``GET /v1/quality`` (status)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from steadyrank.serve.errors import NotFoundError
from steadyrank.serve.server.http.deps import authorised, endpoint
from steadyrank.serve.server.http.responses import JSON, errors
from steadyrank.serve.server.http.state import parts_of

router = APIRouter()


async def _report(request: Request, method: str) -> Response:
    app = parts_of(request)
    evaluator = app.services.evaluator
    if evaluator is None:
        raise NotFoundError("the shadow evaluator is off (quality.enabled: false)")
    return JSON(await app.gateway.call(app.gateway.timeout_s(request), lambda: getattr(evaluator, method).remote()))


@router.get("/v1/canary", tags=["quality"], responses=errors(400, 401, 404, 503, 504),
            dependencies=[Depends(endpoint("canary", record=False)), Depends(authorised)])
async def canary(request: Request) -> Response:
    """The canary comparison of the shadow evaluator (deltas, CIs, verdict)."""
    return await _report(request, "canary_report")


@router.get("/v1/quality", tags=["quality"], responses=errors(400, 401, 404, 503, 504),
            dependencies=[Depends(endpoint("quality", record=False)), Depends(authorised)])
async def quality(request: Request) -> Response:
    """The shadow evaluator's status: windows, counts, last success. Per variant, `windows.<variant>` holds
    the latest evaluation of each of the last `quality.window` distinct golden queries (`n` of them) and
    its `composition`: `queries`, `evaluations` (absorbed), `repeats_refreshed` (repeats that replaced
    their query's entry), `by_source` (`replay`, `mirror`: where each query's latest evaluation came
    from) and `replayed` (queries with a replay: the canary's pairs). `evaluation_settings` names the
    mode and denoise golden evaluations run under; `mirror_skipped_settings` counts golden-matching
    searches under other settings, which are not evaluated (docs/guides/quality.md)."""
    return await _report(request, "status")

"""The shadow evaluator's reports: ``GET /v1/canary`` (canary comparison), ``GET /v1/quality`` (status) and
``GET /v1/quality/drift/proposals`` (uncovered live queries proposed as golden queries)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from steadyrank.serve.errors import NotFoundError, UnauthorisedError
from steadyrank.serve.server.calls import Deadline
from steadyrank.serve.server.http.deps import Role, authorised, endpoint
from steadyrank.serve.server.http.responses import JSON, errors
from steadyrank.serve.server.http.state import parts_of

router = APIRouter()


async def _report(request: Request, method: str, *args: object) -> Response:
    app = parts_of(request)
    evaluator = app.services.evaluator
    if evaluator is None:
        raise NotFoundError("the shadow evaluator is off (quality.enabled: false)")
    return JSON(await app.gateway.call(Deadline.after(app.gateway.timeout_s(request)),
                                       lambda: getattr(evaluator, method).remote(*args)))


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
    searches under other settings, which are not evaluated. `drift` is golden drift: sampled live queries'
    distance to the golden set, the share beyond the golden spread, live against golden topic shares
    (docs/guides/quality.md "Golden drift")."""
    return await _report(request, "status")


@router.get("/v1/quality/drift/proposals", tags=["quality"], responses=errors(400, 401, 404, 422, 503, 504),
            dependencies=[Depends(endpoint("quality_drift_proposals", record=False))])
async def drift_proposals(request: Request, role: Annotated[Role, Depends(authorised)],
                          n: Annotated[int | None, Query(ge=1, le=1000)] = None) -> Response:
    """Uncovered live queries (beyond the golden spread) proposed as new golden queries, one per
    cluster, largest first: `steadyrank golden build --from-traffic` writes them to a file to review.
    Texts are kept only with `quality.log_queries: true` (else `proposals` is empty and `reason` says
    why); they are user queries, so an admin key is needed when keys are configured."""
    if role == "user":
        raise UnauthorisedError("live query texts need an admin key")
    return await _report(request, "drift_proposals", n)

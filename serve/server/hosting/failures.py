"""What Ray Serve's own failures mean to the HTTP edge (:class:`~serve.server.http.services.HostFailures`,
given to it by the Ingress), so that no module of the HTTP edge imports Ray.

- :func:`replica_lost`: the replica serving a call died or became unreachable (``RayActorError``:
  ``ActorDiedError``, ``ActorUnavailableError``), or its answer was lost with that node before it
  was read (``ObjectReconstructionFailedError``, ``OwnerDiedError``, ``ObjectFetchTimedOutError``);
  also wrapped in a ``RayTaskError`` raised by a deployment that called it. Such a call is made
  again (:func:`serve.server.retry.again_if_lost`).
- :func:`serve_error`: Serve's full queue (``BackPressureError``) → ``overloaded``; a deployment
  without replicas (``DeploymentUnavailableError``) → ``unavailable``.
"""

from __future__ import annotations

from steadyrank.serve.errors import OverloadedError, SteadyrankError, UnavailableError
from steadyrank.serve.server.http.services import HostFailures


def replica_lost(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what it wraps) says the replica serving the call died or became
    unreachable, or its answer was lost with its node (see the module docstring)."""
    from ray.exceptions import (
        ObjectFetchTimedOutError,
        ObjectReconstructionFailedError,
        OwnerDiedError,
        RayActorError,
    )

    lost = (RayActorError, ObjectReconstructionFailedError, OwnerDiedError, ObjectFetchTimedOutError)
    seen = 0
    while exc is not None and seen < 6:
        if isinstance(exc, lost):
            return True
        exc = getattr(exc, "cause", None) or exc.__cause__
        seen += 1
    return False


def serve_error(exc: BaseException, retry_after_s: int) -> SteadyrankError | None:
    """The domain error a Ray Serve failure ``exc`` stands for (see the module docstring), or None."""
    from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError

    if isinstance(exc, BackPressureError):
        return OverloadedError("server overloaded: too many queued requests; retry later", retry_after_s=retry_after_s)
    if isinstance(exc, DeploymentUnavailableError):
        return UnavailableError("a deployment is unavailable; retry later", retry_after_s=retry_after_s)
    return None


#: Ray Serve's failures, as the Ingress gives them to the HTTP edge.
RAY_SERVE = HostFailures(lost=replica_lost, domain=serve_error)

"""The HTTP layer: :func:`create_app` builds the FastAPI application around :class:`Services`.

Modules, one job each: :mod:`.app` (``create_app``, error handlers), :mod:`.middleware` (request id,
arrival time, untyped errors → JSON 500, request metrics), :mod:`.deps` (API keys, admission and the
body read under its deadline), :mod:`.gateway` (deadlines, work-based admission, replica retry,
error mapping), :mod:`.scoring` (limits and the rerank/embedding calls), :mod:`.context` (request
ids, log lines), :mod:`.services` (what the app is given and keeps), :mod:`.responses`, and
:mod:`.routers` (one router per API family). See docs/ARCHITECTURE.md, "HTTP layer".
"""

from steadyrank.serve.server.http.app import create_app
from steadyrank.serve.server.http.services import Services

__all__ = ["Services", "create_app"]

"""A request's id: the client's ``X-Request-Id`` when it is 1–128 characters of ``[A-Za-z0-9._:-]``
(anything else could forge log lines or balloon them), else a fresh 32-hex-digit uuid4.

Used by the HTTP layer (:mod:`serve.server.http.middleware`) and by Ray Serve's proxy when it answers
for a lost replica (:mod:`serve.server.hosting.proxy_errors`), so it imports nothing but the standard library.
"""

from __future__ import annotations

import re
import uuid

REQUEST_ID_HEADER = "x-request-id"
_SAFE_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


def request_id_of(header: str | None) -> str:
    """The client's id when it is safe (see the module docstring), else a new one."""
    if header is not None and _SAFE_ID.fullmatch(header):
        return header
    return uuid.uuid4().hex

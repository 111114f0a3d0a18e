"""Schemathesis hooks of the contract fuzz runs (``SCHEMATHESIS_HOOKS=tests.schemathesis_hooks``):
the check ``hostile_json_is_a_json_4xx``.

For every operation with a JSON request body, the first time the run answers one of its cases the
check sends, beside it, each body of :data:`tests.hostile_inputs.HOSTILE_BODIES` (nested JSON, bad
UTF-8, giant numbers) and one body over the server's size limit (``STEADYRANK_HOSTILE_BODY_LIMIT``
bytes + 1; default 8 MiB, ``limits.max_body_bytes``' default), with the run's headers (its API key),
and fails unless each answer is a 4xx with a JSON body: never a 5xx, never a non-JSON page. Once per
operation, so a run costs 7 extra requests per such operation whatever its ``--max-examples``.
The probes show in the run's report as children of the case that triggered them.
"""

from __future__ import annotations

import json
import os
from typing import Any

import schemathesis

from tests.hostile_inputs import HOSTILE_BODIES, oversized

#: operations (``POST /v1/rerank``…) already probed in this run
_probed: set[str] = set()


def hostile_bodies() -> list[tuple[str, bytes]]:
    limit = int(os.environ.get("STEADYRANK_HOSTILE_BODY_LIMIT", str(8 * 1024 * 1024)))
    return [*HOSTILE_BODIES, ("oversized", oversized(limit))]


def _takes_json(case: Any) -> bool:
    return any("json" in (alternative.media_type or "") for alternative in case.operation.body)


def _is_json(response: Any) -> bool:
    kind = response.headers.get("content-type", [""])
    if not (kind[0] if isinstance(kind, list) else kind).startswith("application/json"):
        return False
    try:
        json.loads(response.content)
    except ValueError:
        return False
    return True


@schemathesis.check
def hostile_json_is_a_json_4xx(ctx: Any, response: Any, case: Any) -> bool | None:
    """Each hostile body (see the module docstring) → a JSON 4xx, once per JSON-body operation."""
    label = case.operation.label
    if label in _probed or not _takes_json(case):
        return None
    _probed.add(label)
    kwargs = dict(ctx.internals.transport_kwargs or {})
    wrong = []
    for name, body in hostile_bodies():
        probe = case.derive(keep_auth=True)
        probe.body, probe.media_type = body, "application/json"
        ctx.internals.record_case(parent_id=case.id, case=probe)
        answer = case.operation.schema.transport.send(probe, **kwargs)
        ctx.internals.record_response(case_id=probe.id, response=answer)
        if not (400 <= answer.status_code < 500 and _is_json(answer)):
            wrong.append(f"{name}: {answer.status_code} {answer.content[:120]!r}")
    if wrong:
        raise AssertionError(f"{label}: hostile bodies not answered with a JSON 4xx: " + "; ".join(wrong))
    return None

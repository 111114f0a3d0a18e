"""The JSON response class of every route and the OpenAPI helpers of routes that parse their body
themselves."""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel

from steadyrank.serve.app import protocol
from steadyrank.serve.output import json_safe


class JSON(JSONResponse):
    """JSON without NaN/inf (written as null), compact."""

    def render(self, content: Any) -> bytes:
        try:
            return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
        except ValueError:
            return json.dumps(json_safe(content), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """OpenAPI request body of a route that parses its body itself."""
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": model.model_json_schema(
        ref_template="#/components/schemas/{model}")}}}}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` of a route: steadyrank's JSON error body for each status code."""
    return {code: {"model": protocol.ErrorResponse} for code in codes}

"""The JSON response class of every route and the OpenAPI helpers of routes that parse their body
themselves."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import orjson
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from steadyrank.serve.server.http import schemas


class JSON(JSONResponse):
    """JSON without NaN/inf (written as null), compact, UTF-8; numpy arrays as lists of their values
    (orjson, in C: a response of 512 vectors of 384 floats renders in ~20 ms of the event loop where
    the standard library's encoder took ~400 ms)."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)


IGNORED_FIELDS_HEADER = "X-Ignored-Fields"
_HEADER_NAMES = 32  # names an X-Ignored-Fields header lists at most
_HEADER_NAME_CHARS = 64  # characters of each name it lists at most


def ignored_fields_header(fields: list[str]) -> dict[str, str]:
    """``X-Ignored-Fields``: the request fields the route accepted and did not honour (no header
    when none), each percent-encoded (a header is ASCII; a comma or a newline in a name stays
    inside it), at most ``_HEADER_NAMES`` of them and ``_HEADER_NAME_CHARS`` characters each,
    then ``+N more``: the body bounds the names, a header must stay small."""
    if not fields:
        return {}
    named = [quote(name[:_HEADER_NAME_CHARS], safe="") for name in fields[:_HEADER_NAMES]]
    if len(fields) > _HEADER_NAMES:
        named.append(f"+{len(fields) - _HEADER_NAMES} more")
    return {IGNORED_FIELDS_HEADER: ", ".join(named)}


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """OpenAPI request body of a route that parses its body itself."""
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": model.model_json_schema(
        ref_template="#/components/schemas/{model}")}}}}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` of a route: steadyrank's JSON error body for each status code."""
    return {code: {"model": schemas.ErrorResponse} for code in codes}

"""One contract: the OpenAPI schema states every constraint the server enforces.

Constraints that depend on the settings (``limits.*``, the served model names, the embedder's
dimension) cannot be written into the pydantic models at import time; a field marks them with
:func:`limited` and :func:`install` writes the values of the running server into the schema that
``/openapi.json`` serves. A schema-valid request is then never refused for its shape, and every
request the server refuses for its shape is schema-invalid.

The same markers bound the parse: :func:`bounded` derives from a request model the one the server
validates with, each list marked with a ``maxItems`` limit refused by the parser itself at its
(limit + 1)-th item, before its items are validated (one error, however long the list).
"""

from __future__ import annotations

import functools
import operator
import types
from collections.abc import Mapping
from copy import copy
from typing import Annotated, Any, TypeVar, Union, cast, get_args, get_origin

from fastapi import FastAPI
from pydantic import BaseModel, Field, create_model

M = TypeVar("M", bound=BaseModel)

MARKER = "x-steadyrank-limit"
# At least one character that is not whitespace by Python's str.isspace (what the server checks),
# spelled out so that every regex engine (ECMA, Rust, Python) reads it alike.
NON_BLANK = "[^\\t-\\r\\u001c-\\u0020\\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"


def limited(**keywords: str) -> dict[str, Any]:
    """``json_schema_extra`` marking JSON-Schema ``keywords`` whose value comes from the running
    server: ``limited(maxLength="max_query_chars")`` → ``maxLength: limits.max_query_chars``."""
    return {MARKER: keywords}


def non_blank(**keywords: str) -> dict[str, Any]:
    """A string that must hold a non-whitespace character (plus :func:`limited` keywords)."""
    return {"minLength": 1, "pattern": NON_BLANK, **(limited(**keywords) if keywords else {})}


def _nullable(node: dict[str, Any]) -> bool:
    return any(branch.get("type") == "null" for branch in node.get("anyOf", ()))


def apply_limits(node: Any, values: dict[str, Any]) -> Any:
    """Replace every :func:`limited` marker under ``node`` (in place) by the values it names; an
    ``enum`` of a nullable field keeps ``null``."""
    if isinstance(node, dict):
        marker = node.pop(MARKER, None)
        for keyword, source in (marker or {}).items():
            value = values[source]
            if keyword == "enum" and _nullable(node):
                value = [*value, None]
            node[keyword] = value
        for child in node.values():
            apply_limits(child, values)
    elif isinstance(node, list):
        for child in node:
            apply_limits(child, values)
    return node


def _hoist_defs(schema: dict[str, Any]) -> None:
    """Move ``$defs`` of inline request-body schemas into ``components.schemas`` (their ``$ref``s
    point there)."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for name, sub in node.pop("$defs", {}).items():
                components.setdefault(name, sub)
                walk(sub)
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(schema.get("paths", {}))


def install(app: FastAPI, values: dict[str, Any]) -> None:
    """Serve ``app``'s OpenAPI schema with the markers replaced by ``values``."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = FastAPI.openapi(app)
            _hoist_defs(schema)
            apply_limits(schema, values)  # in place
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi_schema = None
    app.openapi = openapi  # type: ignore[method-assign]


def contract_values(limits: Any, names: Any) -> dict[str, Any]:
    """The values markers may name: every ``limits`` field, the served names, the embedder's
    dimension (``dimensions`` above it is refused) and the dimensions it can be cut to, the
    embedder's prompt names, and the longest instruction each model takes (0: it takes none, so
    only ``null`` is schema-valid)."""
    instruction = limits.max_instruction_chars
    return {
        **limits.model_dump(),
        "embedder_prompt_names": list(names.embedder_prompt_names),
        "reranker_instruction_chars": instruction if names.reranker_instruction else 0,
        "embedder_instruction_chars": instruction if names.embedder_instruction else 0,
        "reranker_names": list(names.reranker),
        "embedder_names": list(names.embedder),
        "embedder_dim": names.embedder_dim,
        "embedder_min_dim": 1 if names.matryoshka else names.embedder_dim,
    }


def bounded(model: type[M], values: Mapping[str, Any]) -> type[M]:
    """A subclass of ``model`` whose every field marked ``limited(maxItems=source)`` holds at most
    ``values[source]`` items (pydantic's ``max_length`` on each list the field's type may be; the rest
    of the field, its validators included, as in ``model``). ``model`` itself when it marks no list."""
    fields: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra
        marker = extra.get(MARKER) if isinstance(extra, dict) else None
        source = marker.get("maxItems") if isinstance(marker, dict) else None
        if isinstance(source, str):
            fields[name] = (_at_most(info.annotation, int(values[source])), copy(info))
    if not fields:
        return model
    return cast("type[M]", create_model(model.__name__, __base__=model, __module__=model.__module__, **fields))


def _at_most(annotation: Any, items: int) -> Any:
    """``annotation`` with ``max_length=items`` on each ``list[...]`` in it (through unions and
    ``Annotated``)."""
    origin = get_origin(annotation)
    if origin is list:
        return Annotated[annotation, Field(max_length=items)]
    if origin is Annotated:
        inner, *metadata = get_args(annotation)
        return Annotated[(_at_most(inner, items), *metadata)]  # type: ignore[valid-type]
    if origin in (Union, types.UnionType):
        return functools.reduce(operator.or_, [_at_most(arg, items) for arg in get_args(annotation)])
    return annotation

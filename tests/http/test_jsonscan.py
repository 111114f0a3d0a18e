"""The JSON value count of ``limits.max_body_values`` (serve/server/http/jsonscan.py) against a count
over the parsed value, for generated JSON whose strings are full of quotes, backslashes and the
structural characters, cut into chunks of every small size (the scan's state crosses chunks)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from steadyrank.serve.server.http.jsonscan import json_values

TRICKY = st.text(alphabet=st.sampled_from(['"', "\\", ",", "[", "{", "]", "}", ":", "a", "é", "\n"]), max_size=12)
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TRICKY,
                    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(TRICKY, inner, max_size=5),
                    max_leaves=40)


def reference(value: object) -> int:
    """1 + Σ max(len(container), 1) over the value's arrays and objects."""
    return 1 + sum(_containers(value))


def _containers(value: object) -> list[int]:
    if isinstance(value, list):
        return [max(len(value), 1), *(n for v in value for n in _containers(v))]
    if isinstance(value, dict):
        return [max(len(value), 1), *(n for v in value.values() for n in _containers(v))]
    return []


@settings(max_examples=600, deadline=None)
@given(value=JSON, chunk=st.integers(1, 9), ascii_only=st.booleans())
def test_the_count_is_the_parsed_values_count_whatever_the_chunks(value: object, chunk: int, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert json_values(text, chunk) == json_values(text) == reference(value), text


def test_examples() -> None:
    assert json_values(b"0") == 1 and json_values(b"[]") == 2 and json_values(b"[0,0]") == 3
    assert json_values(b'{"a": [1, {}], "b": "x,[{"}') == 6  # 1 + 2 members + 2 elements + 1 (the empty object)
    assert json_values(b'["\\\\", "\\"[,"]') == 3  # an escaped backslash, then an escaped quote
    assert json_values(b'["' + b"\\" * 9 + b'"]"]') == 2  # nine backslashes: the quote after them is escaped

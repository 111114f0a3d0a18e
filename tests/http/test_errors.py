"""The error table (serve/server/http/errors.py): one row per error kind, read once at import."""

from __future__ import annotations

import pytest

from steadyrank.serve.errors import ErrorKind
from steadyrank.serve.server.http.errors import _TABLE, KINDS, _parse, error_body, status_of


def test_every_kind_has_its_row() -> None:
    assert set(KINDS) == set(ErrorKind)
    assert status_of(ErrorKind.INPUT_TOO_LONG) == 413 and status_of(ErrorKind.INTERNAL) == 500
    assert error_body(ErrorKind.EMPTY_INPUT, "m", "r", "tei") == {"error": "m", "error_type": "empty", "request_id": "r"}


def test_a_missing_or_doubled_row_is_refused() -> None:
    rows = _TABLE.strip().splitlines()
    assert rows[-1].split()[0] == "internal"
    with pytest.raises(ValueError, match="no row for internal"):
        _parse("\n".join(rows[:-1]))
    with pytest.raises(ValueError, match="invalid_input has two rows"):
        _parse("\n".join([*rows, rows[0]]))

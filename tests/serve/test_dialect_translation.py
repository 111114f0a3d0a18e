"""The dialects' pure pieces, without Ray: object documents, Matryoshka shortening, the token cut,
the schema limits, telling TEI from Infinity bodies, and the served names."""

from __future__ import annotations

import re

import numpy as np
import pytest

from steadyrank.serve.errors import InvalidInputError, NotFoundError
from steadyrank.serve.server.http.dialects.documents import TokenCutter, document_text
from steadyrank.serve.server.http.dialects.embeddings import check_dimensions, shorten
from steadyrank.serve.server.http.dialects.infinity import dialect_of
from steadyrank.serve.server.http.dialects.names import ServedNames
from steadyrank.serve.server.http.dialects.schema_limits import NON_BLANK, apply_limits, limited


def test_document_text_follows_cohere_rank_fields() -> None:
    assert document_text("plain", ["title"]) == "plain"
    assert document_text({"text": "t", "title": "x"}, None) == "t"
    assert document_text({"title": "Disk", "body": "df -h", "id": 3}, ["body", "title", "missing"]) == \
        "body: df -h\ntitle: Disk\n"
    assert document_text({"id": 3}, ["title"]) == ""
    assert document_text({"title": "é"}, None) == "title: é\n"


def test_shorten_is_the_renormalised_prefix() -> None:
    rng = np.random.default_rng(0)
    v = rng.normal(size=(3, 8)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    short = shorten(v, 3)
    assert short.shape == (3, 3) and short.dtype == np.float32
    np.testing.assert_allclose(short, v[:, :3] / np.linalg.norm(v[:, :3], axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(short, axis=1), 1.0, rtol=1e-6)
    assert shorten(np.zeros((1, 4), np.float32), 2).tolist() == [[0.0, 0.0]]
    assert shorten(v, None) is not None and shorten(v, 8).shape == (3, 8)


def test_dimensions_only_for_matryoshka() -> None:
    check_dimensions(None, 384, False, "m")
    check_dimensions(384, 384, False, "m")
    with pytest.raises(InvalidInputError, match="not declared Matryoshka"):
        check_dimensions(64, 384, False, "m")
    check_dimensions(64, 384, True, "m")
    with pytest.raises(InvalidInputError, match="between 1 and 384"):
        check_dimensions(385, 384, True, "m")


def test_token_cut_keeps_the_verbatim_prefix() -> None:
    from steadyrank.serve.runtime.settings import ModelSettings

    cutter = TokenCutter(ModelSettings())
    texts, cut = cutter.cut(["ss -tlnp lists sockets", "df"], 3)
    assert texts == ["ss -t", "df"] and cut == [0]  # ss - t ##ln ##p …
    assert cutter.count(["df"]) == [4]  # [CLS] d ##f [SEP]


def test_apply_limits_writes_the_running_values() -> None:
    schema = {"properties": {"q": {"type": "string", **limited(maxLength="max_query_chars")},
                             "model": {"anyOf": [{"type": "string"}, {"type": "null"}], **limited(enum="names")}}}
    out = apply_limits(schema, {"max_query_chars": 500, "names": ["a", "b"]})
    assert out["properties"]["q"]["maxLength"] == 500
    assert out["properties"]["model"]["enum"] == ["a", "b", None]
    assert "x-steadyrank-limit" not in str(out)


def test_non_blank_pattern_matches_python_isspace() -> None:
    blanks = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    assert not any(re.search(NON_BLANK, c) for c in blanks)
    assert all(re.search(NON_BLANK, c) for c in ("a", "\x1b", "\u200b", "0"))


def test_dialect_of_tells_tei_from_infinity() -> None:
    assert dialect_of({"query": "q", "documents": []}) == "infinity"
    assert dialect_of({"query": "q", "texts": []}) == "tei"
    assert dialect_of({"query": "q", "texts": [], "documents": []}) == "tei"
    assert dialect_of([1]) == "tei"


def test_served_names_resolve_and_list() -> None:
    names = ServedNames(reranker=("model-x", "default", "rerank-v3.5"), embedder=("emb",), embedder_dim=4,
                        matryoshka=False)
    assert names.resolve("reranker", None) == names.resolve("reranker", "rerank-v3.5") == "model-x"
    with pytest.raises(NotFoundError, match="'model-x', 'default', 'rerank-v3.5'"):
        names.resolve("reranker", "gpt-4")
    with pytest.raises(NotFoundError):
        names.resolve("embedder", "default")

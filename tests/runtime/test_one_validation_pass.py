"""One validation pass with a real model (a tiny random cross-encoder): a ``/v1/rerank`` request
through the real app and the real Reranker component is checked at the edge and by the runtime's one
check of what it scores, each once; a direct Python caller of the runtime gets a clear error from
one check per public entry point, the FP32 boundary re-score included."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import steadyrank.serve.runtime.scorer as scorer_module
from steadyrank.serve.runtime import InvalidInputError, ModelSettings, load_scorer
from steadyrank.serve.runtime.scorer import Scorer
from tests.http.test_one_validation_pass import _counted
from tests.runtime.test_chunked_rerank import _app


def _runtime_rules(monkeypatch: pytest.MonkeyPatch, calls: Counter[str]) -> None:
    """Count the runtime's checks in ``calls``: the rerank arguments, the pairs, the instruction."""
    for name in ("check_rerank_args", "_check_pairs"):
        real = getattr(scorer_module, name)

        def counted(*args: Any, _name: str = name, _real: Any = real) -> Any:
            calls[_name] += 1
            return _real(*args)

        monkeypatch.setattr(scorer_module, name, counted)
    real_instruction = Scorer.check_instruction

    def instruction(self: Scorer, value: str | None) -> None:
        calls["Scorer.check_instruction"] += 1
        real_instruction(self, value)

    monkeypatch.setattr(Scorer, "check_instruction", instruction)


@pytest.fixture(scope="module")
def model(make_cross_encoder) -> Path:
    return make_cross_encoder(num_labels=1, seed=3)


def test_a_rerank_request_is_checked_once_at_the_edge_and_once_by_the_runtime(model: Path, monkeypatch) -> None:
    client, _ = _app(model)
    calls = _counted(monkeypatch)
    _runtime_rules(monkeypatch, calls)

    async def call() -> int:
        async with client:
            return (await client.post("/v1/rerank", json={"query": "q", "documents": ["a", "b", "c"]})).status_code

    assert asyncio.run(call()) == 200
    # the Reranker component re-checks nothing: the runtime's score_many checks the pairs and the
    # instruction of its one job once, before the forward pass
    assert calls == {"check_query": 1, "check_instruction": 1, "check_not_empty": 1, "resolve reranker": 1,
                     "check_size": 3, "_check_pairs": 1, "Scorer.check_instruction": 1}, calls


def test_a_direct_caller_gets_one_check_and_a_clear_error(model: Path, monkeypatch) -> None:
    scorer = load_scorer(ModelSettings(path=str(model), precision="bf16", max_length=32))
    calls: Counter[str] = Counter()
    _runtime_rules(monkeypatch, calls)
    # two equal documents tie at top_n = 1: the tie is re-scored in FP32, with no second check
    out = scorer.rerank("q", ["the same text", "the same text"], top_n=1)
    assert out.rescored == 2
    assert calls == {"check_rerank_args": 1, "Scorer.check_instruction": 1}, calls
    with pytest.raises(InvalidInputError, match="documents must be a list of strings, got NoneType"):
        scorer.rerank("q", None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="query must be a non-empty string"):
        scorer.rerank(" ", ["a"])
    with pytest.raises(InvalidInputError, match="takes no instruction"):
        scorer.rerank("q", ["a"], instruction="find it")
    with pytest.raises(InvalidInputError, match=r"pairs\[0\] must be a \(query, document\) pair of strings"):
        scorer.score([("q", 3)])  # type: ignore[list-item]

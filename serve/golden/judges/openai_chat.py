"""The ``openai-chat`` judge: an OpenAI-compatible chat endpoint through the ``openai`` package.

Prompts come from template files (``string.Template``: ``$query``, ``$passage`` for the rubric;
``$query``, ``$passages``, ``$labels`` for the listwise call), packaged as ``templates/grade.txt`` and
``templates/rank.txt`` and replaceable in the judge config. Answers must be JSON: ``{"grade": 1–5}``
or ``{"ranking": [labels]}`` (every label once); a transport error, a 429/5xx or an invalid answer
is retried up to ``max_retries`` times after ``backoff_s · 2^(r−1)`` seconds; other HTTP errors fail
at once. At most ``max_concurrency`` grade calls are in flight. Token usage (prompt + completion, all
attempts) is counted per call.
"""

from __future__ import annotations

import json
import os
import string
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from importlib import resources
from pathlib import Path
from typing import Any

from steadyrank.serve.golden.judges import (
    GRADES,
    Judge,
    JudgeCall,
    JudgeError,
    JudgeUnavailableError,
    OpenAIChatJudgeSettings,
    Passage,
    prompt_hash,
)

LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class InvalidAnswerError(ValueError):
    """The model's answer is not the JSON the prompt asked for."""


def _template(path: str | None, packaged: str) -> string.Template:
    if path is None:
        return string.Template(resources.files("steadyrank.serve.golden").joinpath("templates", packaged).read_text("utf-8"))
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: prompt template not found")
    return string.Template(Path(path).read_text(encoding="utf-8"))


def _json_object(content: str | None) -> dict[str, Any]:
    text = (content or "").strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise InvalidAnswerError(f"not JSON: {text[:80]!r}") from None
    if not isinstance(value, dict):
        raise InvalidAnswerError(f"not a JSON object: {text[:80]!r}")
    return value


def parse_grade(content: str | None) -> int:
    """The ``grade`` of a rubric answer (an integer 1–5)."""
    grade = _json_object(content).get("grade")
    if isinstance(grade, bool) or not isinstance(grade, int) or grade not in GRADES:
        raise InvalidAnswerError(f"'grade' must be an integer 1-5, got {grade!r}")
    return grade


def parse_ranking(content: str | None, labels: Sequence[str]) -> list[str]:
    """The ``ranking`` of a listwise answer: a permutation of ``labels``."""
    ranking = _json_object(content).get("ranking")
    if not isinstance(ranking, list) or sorted(map(str, ranking)) != sorted(labels):
        raise InvalidAnswerError(f"'ranking' must list each of {list(labels)} once, got {ranking!r}")
    return [str(label) for label in ranking]


class OpenAIChatJudge(Judge):
    def __init__(self, settings: OpenAIChatJudgeSettings) -> None:
        import openai

        self.settings = settings
        self._openai = openai
        self.client = openai.OpenAI(base_url=settings.base_url, api_key=os.environ.get(settings.api_key_env, "EMPTY"),
                                    max_retries=0, timeout=settings.timeout_s)
        self.grade_template = _template(settings.grade_template, "grade.txt")
        self.rank_template = _template(settings.rank_template, "rank.txt")

    def check(self) -> None:
        """The endpoint answers ``GET /models`` and serves ``model``."""
        try:
            served = [m.id for m in self.client.models.list()]
        except self._openai.APIError as exc:
            raise JudgeUnavailableError(f"cannot reach the judge at {self.settings.base_url}: {exc}") from None
        if self.settings.model not in served:
            raise JudgeUnavailableError(
                f"the judge at {self.settings.base_url} does not serve {self.settings.model!r} (it serves {served[:5]})")

    def _passage(self, text: str) -> str:
        return text[: self.settings.max_passage_chars]

    def _chat(self, kind: str, doc_ids: list[str], prompt: str, parse: Callable[[str | None], Any]) -> tuple[Any, JudgeCall]:
        retryable = (self._openai.APIConnectionError, self._openai.APITimeoutError, self._openai.RateLimitError,
                     self._openai.InternalServerError, InvalidAnswerError)
        s = self.settings
        tokens = [0, 0]
        for attempt in range(1, s.max_retries + 2):
            try:
                response = self.client.chat.completions.create(
                    model=s.model, messages=[{"role": "user", "content": prompt}], temperature=s.temperature,
                    max_tokens=s.max_tokens, **({"response_format": {"type": "json_object"}} if s.json_mode else {}),
                )
                if response.usage is not None:
                    tokens[0] += response.usage.prompt_tokens
                    tokens[1] += response.usage.completion_tokens
                content = response.choices[0].message.content if response.choices else None
                value = parse(content)
                call = JudgeCall(kind, doc_ids, prompt_hash(prompt), {"content": content}, tokens[0], tokens[1], attempt)
                return value, call
            except retryable as exc:
                if attempt > s.max_retries:
                    raise JudgeError(f"judge {s.model!r} at {s.base_url} failed {attempt} times; last: {exc}") from None
                time.sleep(s.backoff_s * 2 ** (attempt - 1))
            except self._openai.APIStatusError as exc:
                raise JudgeError(f"judge {s.model!r} at {s.base_url} refused the request: {exc}") from None
        raise AssertionError("unreachable")

    def _grade_one(self, query: str, passage: Passage) -> JudgeCall:
        prompt = self.grade_template.substitute(query=query, passage=self._passage(passage[1]))
        grade, call = self._chat("grade", [passage[0]], prompt, parse_grade)
        return JudgeCall(**{**call.to_json(), "answer": {**call.answer, "grades": {passage[0]: grade}}})

    def grade(self, query: str, passages: Sequence[Passage]) -> Iterator[JudgeCall]:
        with ThreadPoolExecutor(max_workers=self.settings.max_concurrency) as pool:
            futures = [pool.submit(self._grade_one, query, p) for p in passages]
            try:
                for future in as_completed(futures):
                    yield future.result()
            finally:
                for future in futures:
                    future.cancel()

    def rank(self, query: str, passages: Sequence[Passage]) -> JudgeCall:
        if len(passages) > len(LABELS):
            raise ValueError(f"a listwise call takes at most {len(LABELS)} passages, got {len(passages)}")
        labels = list(LABELS[: len(passages)])
        block = "\n\n".join(f"[{label}] {self._passage(text)}" for label, (_, text) in zip(labels, passages, strict=True))
        prompt = self.rank_template.substitute(query=query, passages=block, labels=", ".join(f'"{x}"' for x in labels))
        ranking, call = self._chat("rank", [d for d, _ in passages], prompt, lambda c: parse_ranking(c, labels))
        by_label = dict(zip(labels, (d for d, _ in passages), strict=True))
        return JudgeCall(**{**call.to_json(), "answer": {**call.answer, "ranking": [by_label[x] for x in ranking]}})

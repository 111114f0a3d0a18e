"""The ``openai-chat`` judge: an OpenAI-compatible chat endpoint through the ``openai`` package.

Prompts come from template files (``string.Template``: ``$query``, ``$passage`` for the rubric;
``$query``, ``$passages``, ``$labels`` for the listwise call), packaged as ``templates/grade.txt`` and
``templates/rank.txt`` and replaceable in the judge config; the prompts they render enter the
build's resume fingerprint (:meth:`OpenAIChatJudge.prompts_fingerprint`). Answers must be JSON:
``{"grade": 1–5}`` or ``{"ranking": [labels]}`` (every label once).

The query and the passages are documents' and users' text, not the prompt's: each goes in as a
tagged data block (:func:`data_block`: ``<query>…</query>``, ``<passage>…</passage>``,
``<passage id="A">…</passage>``) with ``&``, ``<`` and ``>`` escaped inside, so no text can close its
block or open another, whatever template is configured; the packaged templates tell the model to
treat the blocks as data and never follow instructions in them (a passage that asks for
``{"grade": 5}`` is graded on its content).

Retries (through ``tenacity``): a transport error, a 429/5xx, a malformed response or an invalid
answer is retried up to ``max_retries`` times. The wait before retry r is the server's
``Retry-After`` (``retry-after-ms``, or ``retry-after`` in seconds or as an HTTP date) when it sent
one, else full jitter: uniform in [0, min(``backoff_max_s``, ``backoff_s`` · 2^(r−1))] s. A retry
whose wait would end more than ``retry_budget_s`` after the call's first attempt is not made. Other
HTTP errors fail at once. Every failure is a :class:`JudgeError` naming the call (kind and doc ids).
At most ``max_concurrency`` grade calls are in flight. Token usage (prompt + completion, all
attempts; a missing or null count is 0) is counted per call.
"""

from __future__ import annotations

import email.utils
import hashlib
import html
import json
import os
import string
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from importlib import resources
from pathlib import Path
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, stop_before_delay
from tenacity.wait import wait_random_exponential

from steadyrank.serve.tools.golden.judges import (
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
        return string.Template((resources.files("steadyrank.serve.tools.golden") / "templates" / packaged).read_text("utf-8"))
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: prompt template not found")
    return string.Template(Path(path).read_text(encoding="utf-8"))


def data_block(tag: str, text: str, label: str | None = None) -> str:
    """``text`` as a tagged data block, ``<tag>`` (``<tag id="label">``) on its own line, the text,
    ``</tag>``; ``&``, ``<`` and ``>`` in the text are escaped as HTML entities, so it cannot end the
    block or open another."""
    opening = tag if label is None else f'{tag} id="{label}"'
    return f"<{opening}>\n{html.escape(text, quote=False)}\n</{tag}>"


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


def retry_after_s(exc: BaseException | None) -> float | None:
    """The wait (s) an HTTP error's response asks for: ``retry-after-ms``, else ``retry-after`` as
    seconds or an HTTP date; None when it names none."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            pass
        try:
            return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None
    return None


def _call_name(kind: str, doc_ids: Sequence[str]) -> str:
    shown = ", ".join(doc_ids[:5]) + (f" and {len(doc_ids) - 5} more" if len(doc_ids) > 5 else "")
    return f"the {kind} call for {shown}"


class OpenAIChatJudge(Judge):
    def __init__(self, settings: OpenAIChatJudgeSettings, *, sleep: Callable[[float], None] = time.sleep) -> None:
        """``sleep``: how retry waits are spent (``time.sleep``; tests record the waits instead)."""
        import openai

        self.settings = settings
        self._openai = openai
        self._sleep = sleep
        self._jitter = wait_random_exponential(multiplier=settings.backoff_s, max=settings.backoff_max_s)
        self.client = openai.OpenAI(base_url=settings.base_url, api_key=os.environ.get(settings.api_key_env, "EMPTY"),
                                    max_retries=0, timeout=settings.timeout_s)
        self.grade_template = _template(settings.grade_template,
                                        "grade_balanced.txt" if settings.rubric == "balanced" else "grade.txt")
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

    def prompts_fingerprint(self) -> dict[str, str]:
        """SHA-256 of each prompt rendered for a fixed sample: the template and the data blocks."""
        sample = [("d1", "PASSAGE ONE"), ("d2", "PASSAGE TWO")]
        prompts = {"grade": self._grade_prompt("QUERY", sample[0][1]), "rank": self._rank_prompt("QUERY", sample)[0]}
        return {name: hashlib.sha256(prompt.encode("utf-8")).hexdigest() for name, prompt in prompts.items()}

    def _wait(self, state: RetryCallState) -> float:
        """The server's Retry-After if it sent one, else full jitter (see the module docstring)."""
        asked = retry_after_s(state.outcome.exception() if state.outcome is not None else None)
        return self._jitter(state) if asked is None else asked

    def _passage(self, text: str) -> str:
        return text[: self.settings.max_passage_chars]

    def _chat(self, kind: str, doc_ids: list[str], prompt: str, parse: Callable[[str | None], Any]) -> tuple[Any, JudgeCall]:
        retryable = (self._openai.APIConnectionError, self._openai.APITimeoutError, self._openai.RateLimitError,
                     self._openai.InternalServerError, InvalidAnswerError)
        s = self.settings
        tokens = [0, 0]
        attempts = 0

        def attempt() -> tuple[Any, str | None]:
            nonlocal attempts
            attempts += 1
            json_mode: dict[str, Any] = {"response_format": {"type": "json_object"}} if s.json_mode else {}
            response = self.client.chat.completions.create(
                model=s.model, messages=[{"role": "user", "content": prompt}], temperature=s.temperature,
                max_tokens=s.max_tokens, **json_mode,
            )
            try:
                if response.usage is not None:
                    tokens[0] += response.usage.prompt_tokens or 0
                    tokens[1] += response.usage.completion_tokens or 0
                content = response.choices[0].message.content if response.choices else None
            except (AttributeError, TypeError, IndexError, KeyError) as exc:
                raise InvalidAnswerError(f"malformed response ({type(exc).__name__}: {exc})") from None
            return parse(content), content

        retrying = Retrying(
            retry=retry_if_exception_type(retryable), wait=self._wait, sleep=self._sleep, reraise=True,
            stop=stop_after_attempt(s.max_retries + 1) | stop_before_delay(s.retry_budget_s),
        )
        where = f"judge {s.model!r} at {s.base_url}: {_call_name(kind, doc_ids)}"
        try:
            value, content = retrying(attempt)
        except retryable as exc:
            why = "" if attempts > s.max_retries else f" (the next wait would pass its {s.retry_budget_s:g} s retry budget)"
            raise JudgeError(f"{where} failed {attempts} time{'s' * (attempts != 1)}{why}; last: {exc}") from exc
        except self._openai.APIStatusError as exc:
            raise JudgeError(f"{where} was refused: {exc}") from exc
        except Exception as exc:  # a response the client cannot read, a validation error: still the judge's failure
            raise JudgeError(f"{where} failed: {type(exc).__name__}: {exc}") from exc
        return value, JudgeCall(kind, doc_ids, prompt_hash(prompt), {"content": content}, tokens[0], tokens[1], attempts)

    def _grade_prompt(self, query: str, text: str) -> str:
        return self.grade_template.substitute(query=data_block("query", query),
                                              passage=data_block("passage", self._passage(text)))

    def _rank_prompt(self, query: str, passages: Sequence[Passage]) -> tuple[str, list[str]]:
        """The listwise prompt and its labels (A, B, … in passage order)."""
        if len(passages) > len(LABELS):
            raise ValueError(f"a listwise call takes at most {len(LABELS)} passages, got {len(passages)}")
        labels = list(LABELS[: len(passages)])
        blocks = "\n\n".join(data_block("passage", self._passage(text), label)
                              for label, (_, text) in zip(labels, passages, strict=True))
        prompt = self.rank_template.substitute(query=data_block("query", query), passages=blocks,
                                               labels=", ".join(f'"{x}"' for x in labels))
        return prompt, labels

    def _grade_one(self, query: str, passage: Passage) -> JudgeCall:
        prompt = self._grade_prompt(query, passage[1])
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
        prompt, labels = self._rank_prompt(query, passages)
        ranking, call = self._chat("rank", [d for d, _ in passages], prompt, lambda c: parse_ranking(c, labels))
        by_label = dict(zip(labels, (d for d, _ in passages), strict=True))
        return JudgeCall(**{**call.to_json(), "answer": {**call.answer, "ranking": [by_label[x] for x in ranking]}})

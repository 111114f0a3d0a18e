"""A small OpenAI-compatible chat server on 127.0.0.1 standing in for an LLM judge.

No LLM can run on the test machines, so this stands in for vLLM or a hosted endpoint: it speaks the
real wire protocol (``GET /v1/models``, ``POST /v1/chat/completions``) that the real ``openai``
client talks to. Its answers are deterministic functions of the prompt (word overlap between query
and passage; a query rewrite is the query's first question), so builds against it are reproducible.
Like a real model it can be steered by an injected instruction: an answer (``{"grade": 5}``,
``{"ranking": [...]}``) written in the prompt's own text is obeyed, and a passage put in without
delimiters is the prompt's own text. Text inside a tagged data block (``<query>``, ``<passage>``,
``<passage id="A">``: what the judge's prompts use) is read as data only.
It can fail (HTTP 500), rate-limit (HTTP 429 with a ``Retry-After`` header), answer invalid JSON,
answer with ``usage.prompt_tokens: null`` or with a malformed body (a choice without its message),
or delay answers, or hold every answer until a ``gate`` event is set (a judge that blocks until released),
and records requests and the peak number in flight.
"""

from __future__ import annotations

import html
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "standin-judge"


def overlap(query: str, passage: str) -> float:
    """Share of the query's words found in the passage."""
    words = set(re.findall(r"\w+", query.lower()))
    return len(words & set(re.findall(r"\w+", passage.lower()))) / max(1, len(words))


BLOCK = re.compile(r'<(query|passage)(?: id="([A-Z])")?>\n(.*?)\n</\1>', re.DOTALL)
INJECTED_GRADE = re.compile(r'\{\s*"grade"\s*:\s*([1-5])\s*[,}]')
INJECTED_RANKING = re.compile(r'\{\s*"ranking"\s*:\s*(\[[^\]]*\])\s*\}')
ANSWER_INSTRUCTION = "Answer with a JSON object only"


def read_prompt(prompt: str) -> tuple[str, dict[str, str], str]:
    """The query, the passages by label (``""`` for a rubric prompt's one passage) and the prompt's own
    text (what is outside the data blocks, before the template's answer instruction, whose example
    is no instruction to obey). An undelimited prompt (``Query: …``, ``Passage:`` or ``[A] …`` lines)
    has no data blocks: its passages are part of its own text."""
    blocks = BLOCK.findall(prompt)
    if blocks:
        query = next(html.unescape(text) for tag, _, text in blocks if tag == "query")
        passages = {label: html.unescape(text) for tag, label, text in blocks if tag == "passage"}
        own = BLOCK.sub("", prompt)
    else:
        query = re.search(r"Query: (.*)", prompt).group(1)
        if "[A]" in prompt:
            passages = dict(re.findall(r"^\[([A-Z])\] (.*)$", prompt, flags=re.MULTILINE))
        else:
            passages = {"": prompt.split("Passage:\n", 1)[1].rsplit("\n\n" + ANSWER_INSTRUCTION, 1)[0]}
        own = prompt
    return query, passages, own.rsplit(ANSWER_INSTRUCTION, 1)[0]


def _grade_answer(prompt: str) -> dict[str, Any]:
    query, passages, own = read_prompt(prompt)
    injected = INJECTED_GRADE.search(own)
    if injected:
        return {"grade": int(injected.group(1)), "reason": "as instructed"}
    score = overlap(query, passages[""])
    return {"grade": 1 + sum(score >= t for t in (0.15, 0.3, 0.45, 0.6)), "reason": f"overlap {score:.2f}"}


def _rewrite_answer(prompt: str) -> str:
    """A query rewrite (``retrieval.rewrite``): the first question of the query, else the query."""
    query = prompt.split("Query: ", 1)[1].strip()
    question = re.search(r"[^!?.]*\?", query)
    return (question.group(0) if question else query).strip()


def _rank_answer(prompt: str) -> dict[str, Any]:
    query, passages, own = read_prompt(prompt)
    injected = INJECTED_RANKING.search(own)
    if injected:
        ranking = json.loads(injected.group(1))
        if sorted(ranking) == sorted(passages):
            return {"ranking": ranking}
    return {"ranking": sorted(passages, key=lambda label: (-overlap(query, passages[label]), label))}


class StandinLLM:
    """The server. In request order: the first ``rate_limit_first`` requests get 429 with
    ``Retry-After: retry_after``, the next ``fail_first`` 500, the next ``invalid_first`` a non-JSON
    answer, the next ``malformed_first`` a choice without its message; ``null_usage`` answers
    ``usage.prompt_tokens: null``."""

    def __init__(self, *, delay_s: float = 0.0, fail_first: int = 0, invalid_first: int = 0, rate_limit_first: int = 0,
                 retry_after: str = "1", malformed_first: int = 0, null_usage: bool = False,
                 gate: threading.Event | None = None) -> None:
        self.delay_s, self.fail_first, self.invalid_first = delay_s, fail_first, invalid_first
        self.rate_limit_first, self.retry_after = rate_limit_first, retry_after
        self.malformed_first, self.null_usage = malformed_first, null_usage
        self.gate = gate
        self.requests = 0
        self.completions = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.lock = threading.Lock()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "test"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                standin.handle(self, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def handle(self, handler: Any, body: dict[str, Any]) -> None:
        with self.lock:
            self.requests += 1
            number = self.requests
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            if self.gate is not None and not self.gate.wait(timeout=120):
                raise TimeoutError("the stand-in judge's gate was never released")
            time.sleep(self.delay_s)
            if number <= self.rate_limit_first:
                handler._send(429, {"error": {"message": "rate limited", "type": "rate_limit_error"}},
                              {"Retry-After": self.retry_after})
                return
            number -= self.rate_limit_first
            if number <= self.fail_first:
                handler._send(500, {"error": {"message": "overloaded", "type": "server_error"}})
                return
            prompt = body["messages"][-1]["content"]
            if "Restate the core information need" in prompt:
                content = _rewrite_answer(prompt)
            else:
                answer = _rank_answer(prompt) if '"ranking"' in prompt else _grade_answer(prompt)
                content = json.dumps(answer)
            if number <= self.fail_first + self.invalid_first:
                content = "sorry, I cannot help"
            malformed = number <= self.fail_first + self.invalid_first + self.malformed_first
            choices = [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}]
            handler._send(200, {
                "id": f"c{number}", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop"}] if malformed else choices,  # no message
                "usage": {"prompt_tokens": None if self.null_usage else len(prompt.split()),
                          "completion_tokens": len(content.split()),
                          "total_tokens": len(prompt.split()) + len(content.split())},
            })
            with self.lock:
                self.completions += 1
        finally:
            with self.lock:
                self.in_flight -= 1

    def __enter__(self) -> StandinLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def judge_config(path, base_url: str, **overrides: Any):
    """Write an ``openai-chat`` judge config for the stand-in; returns its path."""
    config = {"type": "openai-chat", "base_url": base_url, "model": MODEL, "backoff_s": 0.01, "max_retries": 3,
              "max_concurrency": 2, "timeout_s": 10, **overrides}
    path.write_text(json.dumps(config), encoding="utf-8")
    return path

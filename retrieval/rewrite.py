"""Query rewriting before search: ``off``, ``rules`` (:mod:`retrieval.denoise`) or ``llm``.

``llm``: an OpenAI-compatible chat endpoint (``POST {base_url}/chat/completions``) is asked to
restate the core information need (:data:`PROMPT`). Answers are cached (LRU, ``cache_size``
queries). The whole call (connect, send, every byte of the answer) has one deadline
(``timeout_s``), and the answer is read as a stream of at most :data:`MAX_RESPONSE_BYTES` bytes: a
larger one (declared or not) is refused after reading no more than that. A timeout, an oversize
answer, an HTTP or network error, or an empty answer falls back to ``rules`` (``Rewrite.source``
says which happened).

The client is httpx's async one (the server extra; imported on the first ``llm`` rewrite, so
importing `retrieval` needs no HTTP client), on the caller's event loop: no worker thread. At the
deadline the call is cancelled and its connection closed at once, so nothing of it runs on (a
thread left blocked in a read, as the standard library's client in ``asyncio.to_thread`` was, kept
reading a slow answer past the deadline, for as long as the endpoint sent a byte within each
socket timeout).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass

from steadyrank.retrieval.denoise import DENOISE_MODES, DenoiseMode, denoise_rules

logger = logging.getLogger("steadyrank.rewrite")

PROMPT = (
    "Restate the core information need of the user's search query below as a short, self-contained "
    "search query. Drop greetings, apologies, fillers, digressions, sign-offs and emoji. Keep every "
    "name, number and quoted text exactly as written. Answer with the rewritten query only.\n\n"
    "Query: {query}"
)


@dataclass(frozen=True)
class Rewrite:
    """``original`` → ``rewritten`` under ``mode``; ``source``: ``off``, ``rules``, ``llm``, ``llm-cache``
    or ``rules-fallback`` (the LLM failed or missed its deadline)."""

    original: str
    rewritten: str
    mode: str
    source: str

    def to_json(self) -> dict[str, str]:
        return {"original": self.original, "rewritten": self.rewritten, "denoise": self.mode, "source": self.source}


@dataclass(frozen=True)
class LlmSettings:
    """The chat endpoint: ``base_url`` (…/v1), ``model``, ``api_key``, ``timeout_s`` (the deadline),
    ``cache_size`` (queries), ``max_tokens`` of the answer."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout_s: float = 2.0
    cache_size: int = 4096
    max_tokens: int = 96


#: The most bytes of a chat answer read: a rewrite of ``max_tokens`` tokens is well under 4 KiB of
#: JSON; an answer beyond this is refused (and ``rules`` used) after reading no more than this plus
#: one network chunk.
MAX_RESPONSE_BYTES = 64 * 1024


class ResponseTooLargeError(ValueError):
    """The chat endpoint's answer is larger than :data:`MAX_RESPONSE_BYTES`."""


class LlmRewriter:
    """Chat-model rewriting with a cache, a deadline and the ``rules`` fallback (module docstring)."""

    def __init__(self, settings: LlmSettings) -> None:
        self.settings = settings
        self.cache: OrderedDict[str, str] = OrderedDict()
        self.fallbacks = 0

    async def _call(self, query: str) -> str:
        import httpx

        s = self.settings
        body = {"model": s.model, "temperature": 0, "max_tokens": s.max_tokens,
                "messages": [{"role": "user", "content": PROMPT.format(query=query)}]}
        headers = {"Accept-Encoding": "identity", **({"Authorization": f"Bearer {s.api_key}"} if s.api_key else {})}
        async with httpx.AsyncClient(timeout=s.timeout_s) as client, \
                client.stream("POST", s.base_url.rstrip("/") + "/chat/completions", json=body,
                              headers=headers) as response:
            response.raise_for_status()
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_RESPONSE_BYTES:
                raise ResponseTooLargeError(f"the answer declares {declared} bytes, more than {MAX_RESPONSE_BYTES}")
            data = bytearray()
            async for chunk in response.aiter_raw():
                data += chunk
                if len(data) > MAX_RESPONSE_BYTES:
                    raise ResponseTooLargeError(f"the answer is larger than {MAX_RESPONSE_BYTES} bytes")
        answer = json.loads(bytes(data))
        text = str(answer["choices"][0]["message"]["content"]).strip().strip('"').strip()
        if not text:
            raise ValueError("empty rewrite")
        return text

    async def rewrite(self, query: str) -> Rewrite:
        if query in self.cache:
            self.cache.move_to_end(query)
            return Rewrite(query, self.cache[query], "llm", "llm-cache")
        started = time.monotonic()
        try:
            text = await asyncio.wait_for(self._call(query), self.settings.timeout_s)
        except Exception as exc:  # noqa: BLE001 - any failure falls back to the rules
            self.fallbacks += 1
            logger.warning("llm rewrite failed after %.2f s (%s: %s); using rules", time.monotonic() - started,
                           type(exc).__name__, exc)
            return Rewrite(query, denoise_rules(query), "llm", "rules-fallback")
        self.cache[query] = text
        if len(self.cache) > self.settings.cache_size:
            self.cache.popitem(last=False)
        return Rewrite(query, text, "llm", "llm")


async def rewrite_query(query: str, mode: DenoiseMode, llm: LlmRewriter | None = None) -> Rewrite:
    """``query`` rewritten under ``mode``; ``llm`` mode needs ``llm``."""
    if mode == "off":
        return Rewrite(query, query, "off", "off")
    if mode == "rules":
        return Rewrite(query, denoise_rules(query), "rules", "rules")
    if mode == "llm":
        if llm is None:
            raise ValueError("denoise 'llm' needs an LLM endpoint (search.denoise_llm / --denoise-llm-url)")
        return await llm.rewrite(query)
    raise ValueError(f"unknown denoise mode {mode!r}; known: {', '.join(DENOISE_MODES)}")

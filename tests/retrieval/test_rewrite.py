"""Issue 36, item 7: the ``llm`` rewriter (``denoise: llm``) is bounded in time and in memory.

The chat endpoint here is a real HTTP server on 127.0.0.1 that misbehaves as a broken or hostile
endpoint would (no LLM runs on the test machines): it trickles its answer one byte at a time, or
sends 16 MiB, with or without a ``Content-Length``. The rewriter must fall back to ``rules`` by its
deadline leaving nothing of the call running (no thread still reading, the connection closed), and
refuse an oversize answer after reading little of it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from steadyrank.retrieval.denoise import denoise_rules
from steadyrank.retrieval.rewrite import MAX_RESPONSE_BYTES, LlmRewriter, LlmSettings

QUERY = "hi there, sorry to bother you, what did Marie Curie publish in 1903? thanks!"
HUGE_BYTES = 16 * 1024 * 1024
#: Files whose frames belong to an HTTP call of the rewriter (the old client ran in a worker thread).
CALL_FILES = ("rewrite.py", "urllib", "http/client.py", "httpx", "httpcore", "socket.py", "ssl.py")


class Misbehaving:
    """The endpoint: ``trickle`` (headers, then one byte every 20 ms for up to 60 s) or ``huge``
    (a valid chat answer padded to 16 MiB; ``declared``: with its Content-Length). Records when the
    client went away (``disconnected``) and the bytes it sent before."""

    def __init__(self, behaviour: str, declared: bool = True) -> None:
        self.disconnected = threading.Event()
        self.sent = 0
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if declared else "HTTP/1.0"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                try:
                    endpoint.answer(self, behaviour, declared)
                except (BrokenPipeError, ConnectionResetError):
                    endpoint.disconnected.set()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, handler: BaseHTTPRequestHandler, behaviour: str, declared: bool) -> None:
        content = json.dumps({"choices": [{"message": {"role": "assistant", "content": "Marie Curie 1903"}}]})
        if behaviour == "huge":
            padding = " " * (HUGE_BYTES - len(content))
            body = (content[:-1] + ', "padding": "' + padding + '"}').encode()
        else:
            body = content.encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        if declared:
            handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        step = 1 if behaviour == "trickle" else 1 << 16
        deadline = time.monotonic() + 60
        for start in range(0, len(body), step):
            handler.wfile.write(body[start:start + step])
            handler.wfile.flush()
            self.sent += step
            if behaviour == "trickle":
                if time.monotonic() > deadline:
                    return
                time.sleep(0.02)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> Misbehaving:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def threads_in_the_call() -> list[str]:
    """Threads other than this one whose stack is inside an HTTP call or the rewriter."""
    current = threading.get_ident()
    found = []
    for ident, frame in sys._current_frames().items():
        if ident == current:
            continue
        files = []
        while frame is not None:
            files.append(Path(frame.f_code.co_filename).as_posix())
            frame = frame.f_back
        if any(part in f for f in files for part in CALL_FILES) and not any("http/server.py" in f or "socketserver.py" in f
                                                                         for f in files):
            found.append(str(ident))
    return found


def test_a_timed_out_rewrite_leaves_no_thread_and_closes_its_connection():
    """The endpoint trickles its answer past the 0.3 s deadline: the rewrite falls back to rules by
    then, and right after it no thread is still in the call and the endpoint sees the connection
    closed (the old client's worker thread went on reading for as long as bytes came)."""
    with Misbehaving("trickle") as endpoint:
        rewriter = LlmRewriter(LlmSettings(base_url=endpoint.base_url, model="m", timeout_s=0.3))

        async def scenario() -> tuple[Any, float, list[str]]:
            started = time.monotonic()
            out = await rewriter.rewrite(QUERY)
            return out, time.monotonic() - started, threads_in_the_call()

        out, elapsed, stray = asyncio.run(scenario())
        assert (out.rewritten, out.source) == (denoise_rules(QUERY), "rules-fallback")
        assert stray == []
        assert endpoint.disconnected.wait(30), "the rewriter's connection was left open after its deadline"
    assert elapsed < 30  # (a cap, not a timing claim: the fallback came at the deadline, not at the answer's end)
    assert rewriter.fallbacks == 1 and not rewriter.cache


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "read-to-close"])
def test_an_oversize_answer_is_refused_after_reading_little_of_it(declared):
    """16 MiB of answer (a valid chat answer, padded): refused, and ``rules`` used; the endpoint
    could not send it all (the client stopped reading after at most MAX_RESPONSE_BYTES and a chunk)."""
    with Misbehaving("huge", declared=declared) as endpoint:
        rewriter = LlmRewriter(LlmSettings(base_url=endpoint.base_url, model="m", timeout_s=30))
        out = asyncio.run(rewriter.rewrite(QUERY))
        assert (out.rewritten, out.source) == (denoise_rules(QUERY), "rules-fallback")
        assert endpoint.disconnected.wait(30), "the endpoint could send all 16 MiB: the client read it all"
        assert endpoint.sent < HUGE_BYTES
    assert MAX_RESPONSE_BYTES < HUGE_BYTES // 100

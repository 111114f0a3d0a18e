"""Optional OpenTelemetry spans: ``server.tracing: true`` with the ``otel`` extra installed
(``pip install 'steadyrank[otel]'``). Off (the default), :func:`span` and :func:`request_span` are
no-ops and nothing is imported from ``opentelemetry`` here.

The spans of one request, one trace:

- ``<METHOD> <route>`` (kind SERVER): the whole request, opened by the HTTP middleware. A W3C
  ``traceparent`` header (and ``tracestate``; the propagators of ``OTEL_PROPAGATORS``, W3C trace
  context and baggage by default) makes it a child of the client's span, in the client's trace;
  attributes ``http.request.method``, ``url.path``, ``http.route``, ``http.response.status_code``,
  ``steadyrank.request_id``; status ERROR on a 5xx;
- ``reranker.rerank``, ``embedder.embed``, ``searcher.search``: the ingress' call of a component,
  from the call to its answer (deadline, admission, replica retry included);
- under ``searcher.search``: the search pipeline's calls, ``embedder.embed``,
  ``retriever.search``, ``reranker.score`` and ``reranker.fp32_keys``.

In the colocated layout (the default) every component runs in the ingress process and the
context follows the calls, so the tree is whole; in the split layout the spans stop at the
ingress' component calls (the context is not sent across Ray handles).

Spans go to the tracer provider the process has (e.g. one set up by ``opentelemetry-instrument``);
where none is set, steadyrank installs the SDK's, exporting over OTLP/HTTP in batches to
``OTEL_EXPORTER_OTLP_ENDPOINT`` (default ``http://localhost:4318``), service name
``OTEL_SERVICE_NAME`` (default ``steadyrank``).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

EXTRA_HINT = "install the otel extra: pip install 'steadyrank[otel]'"

_tracer: Any = None  # the opentelemetry Tracer while tracing is on


def available() -> bool:
    """Whether the OpenTelemetry SDK is installed (looked up, not imported)."""
    try:
        return importlib.util.find_spec("opentelemetry.sdk.trace") is not None
    except ModuleNotFoundError:
        return False


def configure(enabled: bool) -> None:
    """Turn spans on (``enabled``: this process' tracer from the global provider, the SDK's
    installed first where none is set) or off."""
    global _tracer
    if not enabled:
        _tracer = None
        return
    if not available():
        raise RuntimeError(f"server.tracing: true needs OpenTelemetry; {EXTRA_HINT}")
    from opentelemetry import trace

    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):  # nobody set one up
        trace.set_tracer_provider(_otlp_provider())
    _tracer = trace.get_tracer("steadyrank")


def _otlp_provider() -> Any:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # pyright: ignore[reportMissingImports]
            OTLPSpanExporter,  # the `otel` extra: not installed by `make setup`
        )
    except ImportError:
        raise RuntimeError(f"server.tracing: no tracer provider is set up and the OTLP exporter is missing; "
                           f"{EXTRA_HINT}") from None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "steadyrank")}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


def enabled() -> bool:
    return _tracer is not None


def span(name: str, **attributes: Any) -> AbstractContextManager[Any]:
    """A span ``name`` around the block, child of the current one (a no-op while tracing is off)."""
    if _tracer is None:
        return nullcontext()
    return _tracer.start_as_current_span(name, attributes=attributes)


@contextmanager
def request_span(scope: Mapping[str, Any]) -> Iterator[Any]:
    """The SERVER span of one request (its ASGI ``scope``), continuing the trace of its
    ``traceparent`` (see the module docstring); yields the span (None while tracing is off) for
    :func:`end_request`."""
    if _tracer is None:
        yield None
        return
    from opentelemetry import propagate, trace

    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", ())}
    method = scope.get("method", "")
    with _tracer.start_as_current_span(method, context=propagate.extract(headers), kind=trace.SpanKind.SERVER,
                                       attributes={"http.request.method": method,
                                                   "url.path": scope.get("path", "")}) as current:
        yield current


def end_request(current: Any, method: str, route: str | None, status: int, request_id: str) -> None:
    """Name ``current`` (a :func:`request_span`, or None) after its route; record the response."""
    if current is None:
        return
    from opentelemetry.trace import Status, StatusCode

    if route is not None:
        current.update_name(f"{method} {route}")
        current.set_attribute("http.route", route)
    current.set_attribute("http.response.status_code", status)
    current.set_attribute("steadyrank.request_id", request_id)
    if status >= 500:
        current.set_status(Status(StatusCode.ERROR))

"""The log lines that carry request ids.

A request's id (:func:`serve.server.http.request_ids.request_id_of`) is
held in a context variable for the request's task, so every log line steadyrank writes while
serving it carries ``request_id`` (:class:`RequestIdFilter`); ``server.log_format: json`` writes
those lines as JSON objects (:class:`JsonFormatter`).
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar

current_request_id: ContextVar[str | None] = ContextVar("steadyrank_request_id", default=None)


class RequestIdFilter(logging.Filter):
    """Adds ``record.request_id``: the id of the request being served, or ``-``."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = current_request_id.get() or "-"
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts`` (epoch s), ``level``, ``logger``, ``message``,
    ``request_id`` and, for an exception, ``exc`` (the formatted traceback)."""

    def format(self, record: logging.LogRecord) -> str:
        line = {"ts": round(record.created, 6), "level": record.levelname, "logger": record.name,
                "message": record.getMessage(), "request_id": getattr(record, "request_id", None)}
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"


def configure_logging(log_format: str = "text", level: str = "INFO") -> None:
    """steadyrank's own loggers (``steadyrank.*``) write to stderr at ``level``, in text or JSON lines,
    each line carrying the request id. Idempotent: a second call replaces the handler."""
    root = logging.getLogger("steadyrank")
    for handler in [h for h in root.handlers if getattr(h, "_steadyrank", False)]:
        root.removeHandler(handler)
    handler = logging.StreamHandler()
    handler._steadyrank = True  # type: ignore[attr-defined]
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root.addHandler(handler)
    root.setLevel(level.upper())
    root.propagate = False


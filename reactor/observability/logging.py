"""Structured logs: one JSON object per line, with the run id, step and trace ids of the work
that logged it (docs/observability.md, "Structured logs").

:func:`configure_json_logs` is the one switch (``reactor worker --log-format json`` calls it):
it sends log records to a stream as JSON lines (:class:`JsonFormatter`) and turns on the log
context (:func:`reactor.middleware.enable_log_context`), so a record logged inside a run, step,
rollback or job carries ``run_id``, ``reactor``, ``step``, ``job_id`` and ``job_kind``; when an
OpenTelemetry span is current (:class:`reactor.observability.OpenTelemetryMiddleware`, or the
application's own), also ``trace_id`` and ``span_id``. Needs no OpenTelemetry package.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import IO, Any

from reactor.errors import ConfigurationError
from reactor.middleware import current_log_context, enable_log_context

__all__ = ["JsonFormatter", "configure_json_logs", "current_trace_ids"]

#: ``key=value`` tokens of reactor's own log messages copied into the JSON object when the log
#: context does not already have them.
_TOKENS = re.compile(r"(?:^|\s)(event|run_id|context_id|step|job_id|kind)=(\S+)")
_FROM_MESSAGE = {"context_id": "run_id", "kind": "job_kind"}


def current_trace_ids() -> tuple[str, str] | None:
    """``(trace_id, span_id)`` in hex of the current OpenTelemetry span, or ``None`` when no
    valid span is current or ``opentelemetry-api`` is not installed."""
    try:
        from opentelemetry import trace  # deferred: optional dependency (the otel extra)
    except ImportError:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON: ``time`` (ISO 8601, UTC), ``level``,
    ``logger``, ``message``; the log context's ``run_id``, ``reactor``, ``step``, ``job_id``,
    ``job_kind`` and the current ``trace_id``/``span_id`` when there are any; ``event`` (and
    ids the context lacks) read from reactor's ``key=value`` messages; ``exception`` with the
    traceback when the record has one. Non-ASCII characters are escaped, so a line never
    splits."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one JSON line (no trailing newline)."""
        message = record.getMessage()
        document: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": message,
        }
        context = current_log_context()
        if context is not None:
            for key in ("run_id", "reactor", "step", "job_id", "job_kind"):
                value = getattr(context, key)
                if value is not None:
                    document[key] = value
        for key, value in _TOKENS.findall(message):
            document.setdefault(_FROM_MESSAGE.get(key, key), value)
        ids = current_trace_ids()
        if ids is not None:
            document["trace_id"], document["span_id"] = ids
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document, ensure_ascii=True, default=str)


#: The handler :func:`configure_json_logs` installed last (replaced by the next call).
_installed: list[logging.Handler] = []


def configure_json_logs(
    level: int | str = logging.INFO, stream: IO[str] | None = None
) -> logging.Handler:
    """Log JSON lines (:class:`JsonFormatter`) to ``stream`` from the root logger at ``level``
    and keep the log context (docs/observability.md, "Structured logs").

    Calling it again replaces the handler it installed before; other handlers are left alone.

    Args:
        level: the root logger's level (a number or a name such as ``"INFO"``).
        stream: where lines go; ``None``: ``sys.stderr``.

    Returns:
        The installed handler.

    Raises:
        ConfigurationError: ``level`` is not a logging level (naming it).
    """
    resolved = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(resolved, int):
        raise ConfigurationError(
            f"configure_json_logs: level {level!r} is not DEBUG, INFO, WARNING or ERROR"
        )
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for old in _installed:
        root.removeHandler(old)
    _installed[:] = [handler]
    root.addHandler(handler)
    root.setLevel(resolved)
    enable_log_context()
    return handler

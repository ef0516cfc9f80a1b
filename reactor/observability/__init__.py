"""``reactor.observability``: OpenTelemetry tracing and metrics, W3C propagation through jobs,
and structured logs (docs/observability.md).

* :class:`OpenTelemetryMiddleware` (:mod:`reactor.observability.otel`): the built-in
  middleware; spans (:mod:`~reactor.observability.tracing`), metrics
  (:mod:`~reactor.observability.metrics`), trace context carried in job payloads
  (:mod:`~reactor.observability.propagation`). Needs the ``otel`` extra
  (``opentelemetry-api``).
* :func:`configure_json_logs` and :class:`JsonFormatter`
  (:mod:`reactor.observability.logging`): JSON log lines; no extra needed.

Names are imported on first use, so the logging half works without OpenTelemetry installed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reactor.observability.logging import JsonFormatter, configure_json_logs
    from reactor.observability.otel import OpenTelemetryMiddleware

__all__ = ["JsonFormatter", "OpenTelemetryMiddleware", "configure_json_logs"]

_HOMES = {
    "OpenTelemetryMiddleware": "reactor.observability.otel",
    "JsonFormatter": "reactor.observability.logging",
    "configure_json_logs": "reactor.observability.logging",
}


def __getattr__(name: str) -> Any:
    """Import a public name on first use (module docstring).

    Raises:
        AttributeError: not a public name of this package.
    """
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'reactor.observability' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)  # safe: only the fixed _HOMES table

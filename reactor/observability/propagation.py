"""W3C trace context between OpenTelemetry and job payloads (docs/observability.md,
"Propagation").

A job carries the ``traceparent``/``tracestate`` of the span that enqueued it
(:class:`reactor.ports.payloads.TraceContext`); the worker that runs it starts the job's span
as that span's child, so a background run, its async steps and every fan-out element join the
trace that started them. A job enqueued by a sweeper's re-dispatch carries ``link=True``: its
span starts a trace of its own and *links* to the sweep that recovered it. The W3C format is
used whatever global propagator the application configured.
"""

from __future__ import annotations

import time

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from reactor.ports.payloads import TraceContext, TraceSource

__all__ = ["LINKING", "PARENTING", "current_trace_context", "parent_of"]

_W3C = TraceContextTextMapPropagator()

#: The longest ``tracestate`` a job carries (the payload field's bound).
_MAX_TRACESTATE = 512


def _bounded(tracestate: str) -> str:
    """``tracestate`` cut at a list-member boundary to fit the payload field."""
    if len(tracestate) <= _MAX_TRACESTATE:
        return tracestate
    kept: list[str] = []
    size = 0
    for member in tracestate.split(","):
        size += len(member) + (1 if kept else 0)
        if size > _MAX_TRACESTATE:
            break
        kept.append(member)
    return ",".join(kept)


def current_trace_context(*, link: bool = False) -> TraceContext | None:
    """The trace context of the current OpenTelemetry span, stamped with the time now.

    Args:
        link: the receiving job links to it instead of continuing its trace.

    Returns:
        The context, or ``None`` when no valid span is current.
    """
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    traceparent = carrier.get("traceparent")
    if not traceparent:
        return None
    return TraceContext.model_construct(  # our own output: validated where it is received
        traceparent=traceparent, tracestate=_bounded(carrier.get("tracestate", "")),
        link=link, enqueued_at=time.time(),
    )


def _parenting() -> TraceContext | None:
    return current_trace_context()


def _linking() -> TraceContext | None:
    return current_trace_context(link=True)


#: The job stamp of a span whose jobs continue its trace.
PARENTING: TraceSource = _parenting
#: The job stamp of a sweep: the jobs it re-dispatches link to it.
LINKING: TraceSource = _linking


def parent_of(carried: TraceContext | None) -> tuple[Context | None, list[trace.Link]]:
    """Where a job's span starts, from the trace context it carries.

    Returns:
        ``(context, links)``: the context to start the span in (``None``: the current one,
        e.g. no trace carried) and the links to add (a ``link`` context starts a new trace
        linked to the carried span).
    """
    if carried is None:
        return None, []
    carrier = {"traceparent": carried.traceparent}
    if carried.tracestate:
        carrier["tracestate"] = carried.tracestate
    extracted = _W3C.extract(carrier, context=Context())
    span_context = trace.get_current_span(extracted).get_span_context()
    if not span_context.is_valid:
        return None, []
    if carried.link:
        return Context(), [trace.Link(span_context, {"reactor.link.reason": "redispatch"})]
    return extracted, []

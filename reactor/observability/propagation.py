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

__all__ = ["LINKING", "PARENTING", "current_trace_context", "parent_of", "resume_links"]

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


def _extract(traceparent: str, tracestate: str = "") -> tuple[Context, trace.SpanContext]:
    """The OpenTelemetry context of a W3C trace context, and its span context."""
    carrier = {"traceparent": traceparent}
    if tracestate:
        carrier["tracestate"] = tracestate
    extracted = _W3C.extract(carrier, context=Context())
    return extracted, trace.get_current_span(extracted).get_span_context()


def _resume_link(traceparent: str, tracestate: str = "") -> list[trace.Link]:
    span_context = _extract(traceparent, tracestate)[1]
    if not span_context.is_valid:
        return []
    return [trace.Link(span_context, {"reactor.link.reason": "resume"})]


def resume_links(paused: TraceContext | None) -> list[trace.Link]:
    """The span link of a run segment resumed from an interrupt in the caller: to the span
    that paused the run (``reactor.link.reason=resume``; docs/observability.md, "Resumed
    runs").

    Args:
        paused: the pausing span's trace context, or ``None`` (the pause was not traced).

    Returns:
        The link, or none.
    """
    if paused is None:
        return []
    return _resume_link(paused.traceparent, paused.tracestate)


def parent_of(carried: TraceContext | None) -> tuple[Context | None, list[trace.Link]]:
    """Where a job's span starts, from the trace context it carries.

    Returns:
        ``(context, links)``: the context to start the span in (``None``: the current one,
        e.g. no trace carried) and the links to add: a ``link`` context starts a new trace
        linked to the carried span (``redispatch``, or ``resume`` when the carried span is
        the one that paused the run), and a ``resumed_from`` adds a ``resume`` link to the
        span that paused the run this job resumes (docs/observability.md, "Resumed runs").
    """
    if carried is None:
        return None, []
    extracted, span_context = _extract(carried.traceparent, carried.tracestate)
    if not span_context.is_valid:
        return None, []
    resumed = carried.resumed_from
    if carried.link:
        reason = "resume" if resumed == carried.traceparent else "redispatch"
        return Context(), [trace.Link(span_context, {"reactor.link.reason": reason})]
    return extracted, _resume_link(resumed) if resumed else []

"""Spans: one per run segment, step attempt, undo, compensate, rollback and job
(docs/observability.md, "Spans").

Span names are low-cardinality: ``run <reactor>``, ``step <step>``, ``undo <step>``,
``compensate <step>``, ``rollback <reactor>``, ``job <kind>``. Attributes are the identities
and outcomes the :mod:`reactor.middleware` events carry (the ``reactor.*`` names below, plus
``error.type``); inputs and arguments never appear, and error messages are secret-masked
before they reach an event. A failed or errored unit sets the span status to ``ERROR`` with
the masked message; anything else leaves it unset. While a span is current, every job the
engine enqueues is stamped with its trace context (:mod:`reactor.observability.propagation`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextvars import Token
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from reactor.middleware import (
    JobEvent,
    ParkEvent,
    ResumeEvent,
    RollbackEvent,
    RunEvent,
    StepEvent,
)
from reactor.observability.propagation import LINKING, PARENTING, parent_of, resume_links
from reactor.ports.payloads import TraceSource, stamping

__all__ = [
    "ERROR_TYPE",
    "JOB_ATTEMPT",
    "JOB_DELIVERY_COUNT",
    "JOB_ID",
    "JOB_INLINE",
    "JOB_KIND",
    "JOB_QUEUE_LAG",
    "JOB_STATUS",
    "MAP_ID",
    "MAP_INDEX",
    "MAP_STEP",
    "REACTOR_NAME",
    "ROLLBACK_FAILURES",
    "ROLLBACK_REASON",
    "ROLLBACK_STATUS",
    "ROLLBACK_STEP",
    "RUN_DETAIL",
    "RUN_ID",
    "RUN_ORIGIN",
    "RUN_PARENT_ID",
    "RUN_ROOT_ID",
    "RUN_STATUS",
    "STEP_ACTION",
    "STEP_ATTEMPT",
    "STEP_KIND",
    "STEP_NAME",
    "STEP_RETRYABLE",
    "STEP_STATUS",
    "Tracing",
]

REACTOR_NAME = "reactor.name"
RUN_ID = "reactor.run.id"
RUN_ROOT_ID = "reactor.run.root_id"
RUN_PARENT_ID = "reactor.run.parent_id"
RUN_ORIGIN = "reactor.run.origin"
RUN_STATUS = "reactor.run.status"
RUN_DETAIL = "reactor.run.detail"
MAP_STEP = "reactor.map.step"
MAP_ID = "reactor.map.id"
MAP_INDEX = "reactor.map.index"
STEP_NAME = "reactor.step.name"
STEP_KIND = "reactor.step.kind"
STEP_ACTION = "reactor.step.action"
STEP_ATTEMPT = "reactor.step.attempt"
STEP_STATUS = "reactor.step.status"
STEP_RETRYABLE = "reactor.step.retryable"
JOB_KIND = "reactor.job.kind"
JOB_ID = "reactor.job.id"
JOB_ATTEMPT = "reactor.job.attempt"
JOB_DELIVERY_COUNT = "reactor.job.delivery_count"
JOB_INLINE = "reactor.job.inline"
JOB_QUEUE_LAG = "reactor.job.queue_lag"
JOB_STATUS = "reactor.job.status"
ROLLBACK_REASON = "reactor.rollback.reason"
ROLLBACK_STEP = "reactor.rollback.step"
ROLLBACK_STATUS = "reactor.rollback.status"
ROLLBACK_FAILURES = "reactor.rollback.failures"
#: The OpenTelemetry semantic-convention attribute for an error's class.
ERROR_TYPE = "error.type"

_FAILED = frozenset({"failed", "error", "aborted", "incomplete"})


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes that have a value (OpenTelemetry drops ``None`` with a warning)."""
    return {k: v for k, v in attributes.items() if v is not None}


def _finish(span: Span, status: str | None, attributes: Mapping[str, Any],
            error_type: str | None, message: str | None) -> None:
    span.set_attributes(_clean(attributes))
    if status in _FAILED:
        if error_type:
            span.set_attribute(ERROR_TYPE, error_type)
        span.set_status(Status(StatusCode.ERROR, message or status))


class _SpanScope:
    """A span made current (and jobs stamped with it) from enter to exit; subclasses set its
    outcome attributes from the event just before it ends. Class-based, not a generator: it is
    entered once per step attempt."""

    __slots__ = ("_span", "_stamp", "_token")

    def __init__(self, span: Span, stamp: TraceSource) -> None:
        self._span = span
        self._stamp = stamping(stamp)
        self._token: Token[Context] | None = None

    def __enter__(self) -> None:
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        self._stamp.__enter__()

    def outcome(self, span: Span) -> None:
        """Set the outcome attributes and status on ``span`` (the event is final)."""

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self._stamp.__exit__(exc_type, exc, tb)
            self.outcome(self._span)
        finally:
            self._span.end()
            if self._token is not None:
                otel_context.detach(self._token)
                self._token = None


class _RunSpan(_SpanScope):
    __slots__ = ("event",)

    def __init__(self, span: Span, event: RunEvent) -> None:
        super().__init__(span, PARENTING)
        self.event = event

    def outcome(self, span: Span) -> None:
        event = self.event
        _finish(span, event.status, {
            RUN_STATUS: event.status, RUN_DETAIL: event.detail, STEP_NAME: event.step,
        }, event.error_type, event.error_message)


class _StepSpan(_SpanScope):
    __slots__ = ("event",)

    def __init__(self, span: Span, event: StepEvent) -> None:
        super().__init__(span, PARENTING)
        self.event = event

    def outcome(self, span: Span) -> None:
        event = self.event
        _finish(span, event.status, {
            STEP_STATUS: event.status, STEP_RETRYABLE: event.retryable,
        }, event.error_type, event.error_message)


class _RollbackSpan(_SpanScope):
    __slots__ = ("event",)

    def __init__(self, span: Span, event: RollbackEvent) -> None:
        super().__init__(span, PARENTING)
        self.event = event

    def outcome(self, span: Span) -> None:
        event = self.event
        message = f"{event.failures} rollback failure(s)" if event.status == "incomplete" else None
        _finish(span, event.status, {
            ROLLBACK_STATUS: event.status, ROLLBACK_FAILURES: event.failures,
        }, None, message)


class _JobSpan(_SpanScope):
    __slots__ = ("event",)

    def __init__(self, span: Span, event: JobEvent) -> None:
        super().__init__(span, LINKING if event.kind == "sweep" else PARENTING)
        self.event = event

    def outcome(self, span: Span) -> None:
        event = self.event
        _finish(span, event.status, {JOB_STATUS: event.status}, event.error_type, None)


def _run_attributes(event: RunEvent) -> dict[str, Any]:
    return _clean({
        REACTOR_NAME: event.reactor, RUN_ID: event.run_id, RUN_ROOT_ID: event.root_run_id,
        RUN_PARENT_ID: event.parent_run_id, RUN_ORIGIN: event.origin,
        MAP_STEP: event.map_step, MAP_INDEX: event.element_index,
    })


class Tracing:
    """Spans for the middleware scopes (used by
    :class:`reactor.observability.OpenTelemetryMiddleware`). Each method returns the context
    manager of one span: entering makes it current, exiting sets its outcome and ends it.

    Args:
        tracer: the tracer spans are started with.
    """

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def _start(self, name: str, attributes: Mapping[str, Any], *,
               context: Context | None = None, kind: SpanKind = SpanKind.INTERNAL,
               links: Sequence[trace.Link] = ()) -> Span:
        return self.tracer.start_span(
            name, context=context, kind=kind, attributes=attributes, links=links or None,
            record_exception=False, set_status_on_exception=False,
        )

    def run(self, event: RunEvent) -> _SpanScope:
        """The span of one run segment: ``run <reactor>``; a segment resumed from an
        interrupt links to the span that paused the run (docs/observability.md, "Resumed
        runs")."""
        return _RunSpan(self._start(f"run {event.reactor}", _run_attributes(event),
                                    links=resume_links(event.resumed_from)), event)

    def step(self, event: StepEvent) -> _SpanScope:
        """The span of one step attempt: ``step|undo|compensate <step>``."""
        verb = "step" if event.action == "run" else event.action
        return _StepSpan(self._start(f"{verb} {event.step}", {
            REACTOR_NAME: event.reactor, RUN_ID: event.run_id, RUN_ROOT_ID: event.root_run_id,
            STEP_NAME: event.step, STEP_KIND: event.kind, STEP_ACTION: event.action,
            STEP_ATTEMPT: event.attempt,
        }), event)

    def rollback(self, event: RollbackEvent) -> _SpanScope:
        """The span of a rollback: ``rollback <reactor>``."""
        return _RollbackSpan(self._start(f"rollback {event.reactor}", _clean({
            REACTOR_NAME: event.reactor, RUN_ID: event.run_id, RUN_ROOT_ID: event.root_run_id,
            ROLLBACK_REASON: event.reason, ROLLBACK_STEP: event.step, ERROR_TYPE: event.error_type,
        })), event)

    def job(self, event: JobEvent) -> _SpanScope:
        """The span of one job: ``job <kind>``, a ``CONSUMER`` span continuing (or, for a
        sweeper's re-dispatch, linked to) the span that enqueued it. Jobs enqueued during a
        sweep link to its span instead of continuing its trace."""
        parent, links = parent_of(event.trace)
        return _JobSpan(self._start(f"job {event.kind}", _clean({
            "messaging.system": "reactor", "messaging.operation.type": "process",
            "messaging.message.id": event.job_id,
            JOB_KIND: event.kind, JOB_ID: event.job_id, JOB_ATTEMPT: event.attempt,
            JOB_DELIVERY_COUNT: event.delivery_count, JOB_INLINE: event.inline,
            JOB_QUEUE_LAG: event.queue_lag, RUN_ID: event.run_id,
            REACTOR_NAME: event.reactor, STEP_NAME: event.step, MAP_ID: event.map_id,
            MAP_INDEX: event.element_index,
        }), context=parent, kind=SpanKind.CONSUMER, links=links), event)

    @staticmethod
    def park(event: ParkEvent) -> None:
        """A ``reactor.park`` event on the current span."""
        trace.get_current_span().add_event("reactor.park", _clean({
            "reactor.park.reason": event.reason, "reactor.park.delay": event.delay,
            STEP_NAME: event.step,
        }))

    @staticmethod
    def resume(event: ResumeEvent) -> None:
        """A ``reactor.resume`` event on the current span."""
        trace.get_current_span().add_event("reactor.resume", {
            RUN_ID: event.run_id, REACTOR_NAME: event.reactor, STEP_NAME: event.step,
            "reactor.resume.mode": event.mode,
        })

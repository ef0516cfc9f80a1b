"""The job layer's calls into the runtime's middleware (docs/observability.md, "Middleware"):
the scope around each job's handler, dead letters and sweeps.

As in :mod:`reactor.engine.observe`, a runtime with no middleware gets
:data:`reactor.engine.observe.NULL` and no event is built.
"""

from __future__ import annotations

import time
from types import TracebackType

from reactor.config import Runtime
from reactor.engine.invoke import INTERRUPTIONS
from reactor.engine.maps.dispatcher import element_context_id
from reactor.engine.observe import NULL, NullScope
from reactor.jobs.job_context import JobContext
from reactor.middleware import DeadLetterEvent, JobEvent, Scope, SweepEvent
from reactor.ports.payloads import (
    InterruptTimeoutPayload,
    MapElementPayload,
    MapElementRollbackPayload,
    Payload,
    StepPayload,
)
from reactor.ports.router import Job

__all__ = ["dead_lettered", "job", "queue_lag", "swept"]


def queue_lag(job: Job, payload: Payload, now: float) -> float | None:
    """Seconds from ``job`` being due to ``now`` (epoch seconds): due is the later of its
    enqueue time (carried in its trace context) and its ``not_before``; ``None`` when the job
    does not carry its enqueue time (docs/observability.md, "Metrics")."""
    trace = payload.trace
    if trace is None or trace.enqueued_at is None:
        return None
    due = max(trace.enqueued_at, job.not_before or 0.0)
    return max(now - due, 0.0)


class _JobScope:
    """A job's scope: ``ok`` when its handler returns, else ``error`` (or ``aborted``)."""

    __slots__ = ("_scope",)

    def __init__(self, scope: Scope[JobEvent]) -> None:
        self._scope = scope

    def __enter__(self) -> _JobScope:
        self._scope.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        event = self._scope.event
        if exc is None:
            event.status = "ok"
        else:
            event.status = "aborted" if isinstance(exc, INTERRUPTIONS) else "error"
            event.error_type = type(exc).__name__
        self._scope.__exit__(exc_type, exc, tb)


def job(jc: JobContext, payload: Payload) -> _JobScope | NullScope:
    """The scope of running ``jc.job`` (parsed as ``payload``) through its handler.

    Returns:
        The scope (:data:`reactor.engine.observe.NULL` without middleware).
    """
    hooks = jc.runtime.hooks
    if not hooks.active:
        return NULL
    raw = jc.job
    run_id = getattr(payload, "context_id", None) or getattr(payload, "root_context_id", None)
    step = getattr(payload, "step_name", None)
    map_id = getattr(payload, "map_id", None)
    index: int | None = None
    if isinstance(payload, MapElementPayload):
        index = payload.index
        run_id = element_context_id(payload.map_id, payload.index)
    elif isinstance(payload, MapElementRollbackPayload):
        index = payload.position
    elif isinstance(payload, StepPayload):
        run_id = payload.step_context_id
    elif isinstance(payload, InterruptTimeoutPayload):
        step = payload.step
    return _JobScope(hooks.job(JobEvent(
        kind=raw.kind, job_id=raw.id, attempt=raw.attempt,
        delivery_count=jc.delivery.delivery_count if jc.delivery is not None else 1,
        inline=jc.inline, run_id=run_id, reactor=getattr(payload, "reactor", None),
        step=step, map_id=map_id, element_index=index, trace=payload.trace,
        queue_lag=queue_lag(raw, payload, time.time()),
    )))


def dead_lettered(runtime: Runtime, job: Job, reason: str) -> None:
    """Tell the middleware that a worker dead-lettered ``job`` for ``reason``."""
    hooks = runtime.hooks
    if hooks.middleware:
        hooks.dead_letter(DeadLetterEvent(kind=job.kind, job_id=job.id, reason=reason))


def swept(runtime: Runtime, redispatched: dict[str, int], errors: int) -> None:
    """Tell the middleware what one sweep re-dispatched, by sweeper."""
    hooks = runtime.hooks
    if hooks.middleware:
        hooks.sweep(SweepEvent(redispatched=redispatched, errors=errors))

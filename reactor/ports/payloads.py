"""Typed payloads of the job kinds (docs/architecture.md, "Job kinds"): identities only, validated
on receipt.

A payload that fails validation is a poison job: the worker dead-letters it with the
validation message as the reason instead of crash-looping (docs/workers.md, "Hostile input").

Every payload may carry a :class:`TraceContext` (``trace``): the W3C trace context of the span
that enqueued it, so the job joins its trace (docs/observability.md, "Propagation"). It is
optional: a job without one (enqueued by an older version, or with no tracing middleware) runs
exactly as before, and a malformed one is dropped with a warning naming the field, never the
job. :func:`job` stamps it from the :func:`stamping` source active in the enqueuing context.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any, ClassVar

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from reactor.errors import DeserializationError
from reactor.model.text import escaping_logger
from reactor.ports.router import Job

__all__ = [
    "PAYLOAD_TYPES",
    "InterruptTimeoutPayload",
    "MapCollectPayload",
    "MapElementPayload",
    "MapElementRollbackPayload",
    "Payload",
    "RunDeadlinePayload",
    "RunPayload",
    "SleepWakePayload",
    "StepPayload",
    "SweepPayload",
    "TraceContext",
    "TraceSource",
    "current_stamp",
    "job",
    "parse_payload",
    "stamping",
]

log = escaping_logger("reactor.worker")

#: A W3C ``traceparent``: version (not ``ff``), 32-hex trace id, 16-hex parent id, 2-hex flags;
#: a later version may append fields after a ``-``.
_TRACEPARENT = re.compile(r"^(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}"
                          r"-[0-9a-f]{2}(-[\x21-\x7e]*)?$")


class TraceContext(BaseModel):
    """The W3C trace context a job carries (docs/observability.md, "Propagation").

    Attributes:
        traceparent: the ``traceparent`` header of the span that enqueued the job.
        tracestate: the ``tracestate`` header (vendor data), ``""`` when none; at most 512
            printable ASCII characters.
        link: ``True`` when the job's span must *link* to this context instead of continuing
            its trace (a sweeper's re-dispatch: docs/observability.md, "Spans").
        enqueued_at: epoch seconds (the enqueuer's clock) when the job was built, for the
            queue lag; ``None`` when unknown.
        resumed_from: the ``traceparent`` of the span that paused the run this job resumes
            (``Reactor.resume`` handing the run to a worker): the job's span links to it
            (docs/observability.md, "Resumed runs"); ``None`` otherwise.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    traceparent: str = Field(max_length=256)
    tracestate: str = Field("", max_length=512, pattern=r"^[\x20-\x7e]*$")
    link: bool = False
    enqueued_at: float | None = Field(None, ge=0, allow_inf_nan=False)
    resumed_from: str | None = Field(None, max_length=256)

    @field_validator("traceparent", "resumed_from")
    @classmethod
    def _w3c_traceparent(cls, value: str | None) -> str | None:
        """``version-traceid-parentid-flags`` in lower-case hex, ids not all zeros."""
        if value is not None and not _TRACEPARENT.match(value):
            raise ValueError(
                "must be a W3C traceparent: 2-hex version (not ff), 32-hex trace id and "
                "16-hex parent id (not all zeros), 2-hex flags"
            )
        return value


#: What :func:`job` calls to get the trace context of a job built now (``None``: none).
TraceSource = Callable[[], TraceContext | None]

_TRACE_SOURCE: ContextVar[TraceSource | None] = ContextVar("reactor_job_trace", default=None)


def current_stamp() -> TraceContext | None:
    """The trace context :func:`job` would stamp on a job built here and now (``None``: none),
    for code that enqueues after the stamping span ended (docs/observability.md,
    "Propagation")."""
    source = _TRACE_SOURCE.get()
    return source() if source is not None else None


class stamping:  # noqa: N801 - used as a function: ``with stamping(source):``
    """Make :func:`job` stamp every job built in this context (thread or task) with
    ``source()`` until the block ends (a tracing middleware sets it around its spans:
    docs/observability.md, "Propagation").

    Args:
        source: returns the trace context to carry, or ``None``; ``None`` stops stamping.
    """

    __slots__ = ("_source", "_token")

    def __init__(self, source: TraceSource | None) -> None:
        self._source = source
        self._token: Token[TraceSource | None] | None = None

    def __enter__(self) -> None:
        self._token = _TRACE_SOURCE.set(self._source)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _TRACE_SOURCE.reset(self._token)
            self._token = None


class Payload(BaseModel):
    """Base of every job payload: frozen, unknown fields ignored (forward compatibility).

    Attributes:
        trace: the trace context the job carries (optional; docs/observability.md,
            "Propagation"). A malformed one is dropped (logged once per job, naming the
            field) and the job runs untraced.
        hand_backs: how many times a worker whose definition cannot continue the job's run
            handed it back for a worker that can (docs/deploys.md, "Routing by version");
            in the body only when above 0, so other bodies keep their shape.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")
    kind: ClassVar[str] = ""
    trace: TraceContext | None = None
    hand_backs: int = Field(0, ge=0)

    @field_validator("trace", mode="wrap")
    @classmethod
    def _drop_malformed_trace(
        cls, value: Any, handler: ValidatorFunctionWrapHandler
    ) -> TraceContext | None:
        """Tracing metadata never costs a job: a malformed ``trace`` reads as absent."""
        try:
            parsed: TraceContext | None = handler(value)
        except ValidationError as exc:
            problems = "; ".join(
                f"trace.{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}"
                for err in exc.errors()
            )
            log.warning("event=job_trace_dropped kind=%s reason=%s", cls.kind, problems)
            return None
        return parsed


class RunPayload(Payload):
    """Resume (or start) a run in a worker (ruby_reactor's ``perform_async``).

    Attributes:
        context_id: the run's id.
        reactor: its registered reactor name.
        snooze_count: contention parks so far in this job chain.
    """

    kind: ClassVar[str] = "run"
    context_id: str = Field(min_length=1)
    reactor: str = Field(min_length=1)
    snooze_count: int = Field(0, ge=0)


class StepPayload(Payload):
    """Run one ``async_step`` unit (ruby_reactor's ``perform_step_async``).

    Attributes:
        root_context_id: the root run the worker loads.
        reactor: the root's registered reactor name.
        step_context_id: the (possibly composed) context that owns the step.
        step_name: the step.
        contention_attempts: parks so far (bounded by ``lock_snooze_max_attempts``).
    """

    kind: ClassVar[str] = "step"
    root_context_id: str = Field(min_length=1)
    reactor: str = Field(min_length=1)
    step_context_id: str = Field(min_length=1)
    step_name: str = Field(min_length=1)
    contention_attempts: int = Field(0, ge=0)


class MapElementPayload(Payload):
    """Run one fan-out map element.

    Attributes:
        map_id: the map.
        index: the element index.
        atomic: overrides the map's ``atomic`` setting when present; legacy payloads spell it
            ``fail_fast``.
        attempt: retries or parks of this element so far.
    """

    kind: ClassVar[str] = "map_element"
    map_id: str = Field(min_length=1)
    index: int = Field(ge=0)
    atomic: bool | None = Field(None, validation_alias=AliasChoices("atomic", "fail_fast"))
    attempt: int = Field(0, ge=0)


class MapCollectPayload(Payload):
    """Collect a settled map and signal its owner once.

    Attributes:
        map_id: the map.
    """

    kind: ClassVar[str] = "map_collect"
    map_id: str = Field(min_length=1)


class MapElementRollbackPayload(Payload):
    """Roll back the element at one tail position of a map's element index (docs/protocol.md#maps).

    Attributes:
        map_id: the map.
        position: the tail position (0 = the last appended element).
        attempt: contention re-queues so far (bounded by ``lock_snooze_max_attempts``).
    """

    kind: ClassVar[str] = "map_element_rollback"
    map_id: str = Field(min_length=1)
    position: int = Field(ge=0)
    attempt: int = Field(0, ge=0)


class SweepPayload(Payload):
    """One sweep tick.

    Attributes:
        window: the tick's time window (``floor(now / sweeper_interval)``), 0 when ad hoc.
    """

    kind: ClassVar[str] = "sweep"
    window: int = Field(0, ge=0)


class InterruptTimeoutPayload(Payload):
    """Expire a paused interrupt at its deadline (docs/run-control.md, "Interrupts": active
    expiry). Enqueued with a delay when the run pauses; a run no longer paused there is left
    alone.

    Attributes:
        context_id: the paused root run.
        reactor: its registered reactor name.
        step: the interrupt's step path.
        deadline: the deadline, in epoch seconds on the runtime clock (a job delivered early
            is re-enqueued for the rest).
    """

    kind: ClassVar[str] = "interrupt_timeout"
    context_id: str = Field(min_length=1)
    reactor: str = Field(min_length=1)
    step: str = Field(min_length=1)
    deadline: float = Field(allow_inf_nan=False)


class RunDeadlinePayload(Payload):
    """Stop a run at its deadline if it has not finished (docs/concepts.md, "Run
    deadlines"). Enqueued with a delay when a run with a deadline leaves its caller
    unfinished; a finished run is left alone.

    Attributes:
        context_id: the root run.
        reactor: its registered reactor name.
        deadline: the deadline, in epoch seconds on the runtime clock (a job delivered early
            is re-enqueued for the rest).
    """

    kind: ClassVar[str] = "run_deadline"
    context_id: str = Field(min_length=1)
    reactor: str = Field(min_length=1)
    deadline: float = Field(allow_inf_nan=False)


#: Payload model per job kind.
class SleepWakePayload(Payload):
    """Wake a run sleeping at a ``sleep`` step (docs/schedules.md, "Durable sleep").
    Enqueued with a delay when the run parks there; a run no longer sleeping at that step is
    left alone.

    Attributes:
        context_id: the sleeping root run.
        reactor: its registered reactor name.
        step: the sleep's step path.
        wake_at: the wake time, in epoch seconds on the runtime clock (a job delivered early
            is re-enqueued for the rest).
    """

    kind: ClassVar[str] = "sleep_wake"
    context_id: str = Field(min_length=1)
    reactor: str = Field(min_length=1)
    step: str = Field(min_length=1)
    wake_at: float = Field(allow_inf_nan=False)


PAYLOAD_TYPES: dict[str, type[Payload]] = {
    cls.kind: cls
    for cls in (
        RunPayload,
        StepPayload,
        MapElementPayload,
        MapCollectPayload,
        MapElementRollbackPayload,
        SweepPayload,
        InterruptTimeoutPayload,
        RunDeadlinePayload,
        SleepWakePayload,
    )
}


def job(payload: Payload, **envelope: Any) -> Job:
    """Wrap a payload in a :class:`reactor.ports.Job` of the matching kind.

    The payload's ``trace`` is the :func:`stamping` source's (the enqueuing span's,
    docs/observability.md, "Propagation") when one is active here, else the one the payload
    already carries (a re-enqueued payload keeps its trace through an untraced process); a
    payload without either has no ``trace`` key at all, so its body is what it was before
    tracing existed.

    Args:
        payload: the typed payload.
        **envelope: extra :class:`Job` fields (``attempt``, ``not_before``, ``id``).
    """
    body = payload.model_dump(
        mode="json", exclude={"trace", "hand_backs"} if not payload.hand_backs else {"trace"}
    )
    source = _TRACE_SOURCE.get()
    trace = source() if source is not None else None
    if trace is None:
        trace = payload.trace
    if trace is not None:
        # ``resumed_from`` only when set: other traced bodies keep their shape
        body["trace"] = trace.model_dump(
            mode="json", exclude=None if trace.resumed_from else {"resumed_from"}
        )
    return Job(kind=payload.kind, payload=body, **envelope)


def parse_payload(job: Job) -> Payload:
    """Validate a received job's payload against its kind.

    Raises:
        DeserializationError: unknown kind, or a payload field is missing or malformed (the
            message names the field), so the worker can dead-letter it with that reason.
    """
    model = PAYLOAD_TYPES.get(job.kind)
    if model is None:
        raise DeserializationError(f"unknown job kind {job.kind!r}")
    try:
        return model.model_validate(dict(job.payload))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'payload'}: {err['msg']}"
            for err in exc.errors()
        )
        raise DeserializationError(f"invalid {job.kind!r} job payload: {problems}") from exc

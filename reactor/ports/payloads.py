"""Typed payloads of the job kinds (docs/architecture.md, "Job kinds"): identities only, validated
on receipt.

A payload that fails validation is a poison job: the worker dead-letters it with the
validation message as the reason instead of crash-looping (docs/workers.md, "Hostile input").
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from reactor.errors import DeserializationError
from reactor.ports.router import Job

__all__ = [
    "PAYLOAD_TYPES",
    "MapCollectPayload",
    "MapElementPayload",
    "MapElementRollbackPayload",
    "Payload",
    "RunPayload",
    "StepPayload",
    "SweepPayload",
    "job",
    "parse_payload",
]


class Payload(BaseModel):
    """Base of every job payload: frozen, unknown fields ignored (forward compatibility)."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    kind: ClassVar[str] = ""


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


#: Payload model per job kind.
PAYLOAD_TYPES: dict[str, type[Payload]] = {
    cls.kind: cls
    for cls in (
        RunPayload,
        StepPayload,
        MapElementPayload,
        MapCollectPayload,
        MapElementRollbackPayload,
        SweepPayload,
    )
}


def job(payload: Payload, **envelope: Any) -> Job:
    """Wrap a payload in a :class:`reactor.ports.Job` of the matching kind.

    Args:
        payload: the typed payload.
        **envelope: extra :class:`Job` fields (``attempt``, ``not_before``, ``id``).
    """
    return Job(kind=payload.kind, payload=payload.model_dump(mode="json"), **envelope)


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

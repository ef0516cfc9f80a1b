"""The router protocol: how work moves from the engine to workers (ARCHITECTURE §3).

A job is a small JSON envelope ``{id, kind, payload, attempt, not_before}``. Payloads carry
identities only (ids, names, positions): state is persisted before the job is enqueued
(ARCHITECTURE §5 rule 2). Delivery is at-least-once: a delivery not acked within its
visibility window comes back.

The engine calls only :meth:`Router.enqueue`. ``reactor worker`` uses the consumer side:
:meth:`Router.receive`, :meth:`Router.ack`, :meth:`Router.retry`, :meth:`Router.extend` and
:meth:`Router.dead_letter`.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from reactor.model.errors import DeserializationError

__all__ = [
    "JOB_KINDS",
    "DeadLetter",
    "Delivery",
    "Job",
    "JobKind",
    "Router",
]

JobKind = Literal["run", "step", "map_element", "map_collect", "map_element_rollback", "sweep"]

#: Every job kind a worker knows.
JOB_KINDS: frozenset[str] = frozenset(get_args(JobKind))


@dataclass(frozen=True, slots=True)
class Job:
    """A unit of background work.

    Attributes:
        kind: one of :data:`JOB_KINDS`.
        payload: identities only, JSON-native values.
        id: a unique job id (a UUID string by default).
        attempt: how many times this job chain was re-enqueued by its handler (parks, retries).
        not_before: epoch seconds before which the job must not run (``None`` = now); routers
            whose native delay is bounded (SQS: 900 s) re-defer until this time.
    """

    kind: str
    payload: Mapping[str, Any]
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    attempt: int = 0
    not_before: float | None = None

    def to_json(self) -> str:
        """Encode the envelope as compact JSON text."""
        return json.dumps(
            {
                "id": self.id,
                "kind": self.kind,
                "payload": dict(self.payload),
                "attempt": self.attempt,
                "not_before": self.not_before,
            },
            separators=(",", ":"),
            allow_nan=False,
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Job:
        """Decode an envelope produced by :meth:`to_json`.

        The kind is NOT checked against :data:`JOB_KINDS` here (a worker dead-letters unknown
        kinds with that reason); only the envelope's shape is.

        Raises:
            DeserializationError: the text is not JSON or a field has the wrong type.
        """
        try:
            data = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise DeserializationError(f"job envelope is not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise DeserializationError("job envelope must be a JSON object")
        job_id, kind, payload = data.get("id"), data.get("kind"), data.get("payload")
        attempt, not_before = data.get("attempt", 0), data.get("not_before")
        if not isinstance(job_id, str) or not job_id:
            raise DeserializationError("job envelope field 'id' must be a non-empty string")
        if not isinstance(kind, str) or not kind:
            raise DeserializationError("job envelope field 'kind' must be a non-empty string")
        if not isinstance(payload, dict):
            raise DeserializationError("job envelope field 'payload' must be an object")
        if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 0:
            raise DeserializationError("job envelope field 'attempt' must be an integer >= 0")
        if not_before is not None and (
            not isinstance(not_before, int | float)
            or isinstance(not_before, bool)
            or not math.isfinite(not_before)
        ):
            raise DeserializationError("job envelope field 'not_before' must be a number or null")
        return cls(
            kind=kind,
            payload=payload,
            id=job_id,
            attempt=attempt,
            not_before=None if not_before is None else float(not_before),
        )


@dataclass(frozen=True, slots=True)
class Delivery:
    """One received job, leased to the receiving worker until acked or its visibility lapses.

    Attributes:
        job: the decoded job.
        receipt: the router's handle for ack/retry/extend (opaque).
        delivery_count: how many times this message was delivered (1 on first delivery).
    """

    job: Job
    receipt: str
    delivery_count: int = 1


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A message a worker could not process, kept with the reason.

    Attributes:
        body: the raw message text as received.
        reason: why it was dead-lettered (e.g. ``"unknown job kind 'x'"``).
        at: epoch seconds when it was dead-lettered.
    """

    body: str
    reason: str
    at: float


@runtime_checkable
class Router(Protocol):
    """A queue of jobs with delays, visibility leases and a dead-letter place."""

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        """Queue ``job`` to become visible after ``delay_seconds`` (any non-negative delay).

        Returns:
            The job id.

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
            RouterError: the backend failed.
        """
        ...

    def receive(self, max_jobs: int = 1, wait_seconds: float = 0) -> list[Delivery]:
        """Lease up to ``max_jobs`` due jobs, waiting up to ``wait_seconds`` for one to appear.

        A message that cannot be decoded is dead-lettered with the reason and not returned.
        """
        ...

    def ack(self, delivery: Delivery) -> None:
        """Remove a delivered job for good. A stale receipt is logged, never raised."""
        ...

    def retry(self, delivery: Delivery, delay_seconds: float) -> None:
        """Give the job back to be delivered again after ``delay_seconds``."""
        ...

    def extend(self, delivery: Delivery, seconds: float) -> None:
        """Keep the job invisible for another ``seconds`` from now (heartbeat of long handlers)."""
        ...

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        """Move a delivered job to the dead-letter place with ``reason`` (and ack it)."""
        ...

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """Read dead-lettered messages, oldest first."""
        ...

    def close(self) -> None:
        """Release connections and threads; idempotent."""
        ...

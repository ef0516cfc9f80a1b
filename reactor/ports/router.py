"""The router protocol: how work moves from the engine to workers (docs/protocol.md#routers).

A job is a small JSON envelope ``{id, kind, payload, attempt, not_before}``. Payloads carry
identities only (ids, names, positions): state is persisted before the job is enqueued
(docs/architecture.md, "Execution invariants"). Delivery is at-least-once: a delivery not
acked within its visibility window comes back.

The protocol is split by who calls it (docs/protocol.md#routers). The engine needs only a
:class:`JobSink` (:meth:`JobSink.enqueue`, :meth:`JobSink.close`); ``reactor worker`` needs a
:class:`JobSource` (:meth:`JobSource.receive`, :meth:`JobSource.ack`, :meth:`JobSource.retry`,
:meth:`JobSource.extend`, :meth:`JobSource.dead_letter`, :meth:`JobSource.dead_letters`).
:class:`Router` is both, and is what every adapter implements. Optional capabilities are
protocols of their own (:class:`DeadLetterAdmin` here, :mod:`reactor.ports.capabilities`,
:mod:`reactor.ports.inspection`), checked with ``isinstance``. An adapter that has only a
small queue primitive (:class:`reactor.ports.queues.QueuePrimitive`) gets a whole router from
:class:`reactor.generic.router.GenericRouter` (docs/protocol.md, "Building a router").

**Poison messages** (docs/workers.md, "Hostile input"; docs/writing-an-adapter.md, routers): a
message body that is not UTF-8, larger than :data:`MAX_ENVELOPE_BYTES`, nested deeper than
:data:`reactor.model.codec.MAX_DEPTH`, or not a job envelope makes :meth:`Job.from_json` raise
:class:`~reactor.errors.DeserializationError` and nothing else. Every router catches it
per message inside :meth:`Router.receive` and dead-letters that message with the reason and its
raw body (:meth:`DeadLetter.from_raw`); the other messages of the receive are unaffected.

**Stale receipts** (docs/writing-an-adapter.md, routers): a receipt is current from its
delivery until it is acked, retried or dead-lettered, or until the message is delivered again
(its lease lapsed and a later :meth:`Router.receive` returned it, with a new receipt). An
:meth:`Router.ack`, :meth:`Router.retry`, :meth:`Router.extend` or :meth:`Router.dead_letter`
with a receipt that is no longer current is a no-op that the router logs: it returns ``None``
as usual, raises nothing, and leaves the current delivery leased and ackable. So a worker whose
lease lapsed can never delete, release, extend or dead-letter the job another worker now runs.
A lease that lapsed but was not redelivered yet is still current.

**Dead-letter administration** (docs/workers.md, "Dead letters"; docs/writing-an-adapter.md,
routers) is an optional capability, :class:`DeadLetterAdmin`, kept apart from :class:`Router`
so the core protocol does not grow: every built-in router implements it (list by page, show by
id, requeue, purge), and ``reactor dead-letters`` drives it.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from reactor.errors import DeserializationError, EncodeError
from reactor.model import codec

__all__ = [
    "JOB_KINDS",
    "MAX_ENVELOPE_BYTES",
    "DeadLetter",
    "DeadLetterAdmin",
    "Delivery",
    "Job",
    "JobKind",
    "JobSink",
    "JobSource",
    "Router",
]

JobKind = Literal[
    "run", "step", "map_element", "map_collect", "map_element_rollback", "sweep",
    "interrupt_timeout",
    "run_deadline",
    "sleep_wake",
]

#: Every job kind a worker knows.
JOB_KINDS: frozenset[str] = frozenset(get_args(JobKind))

#: The largest job envelope, in bytes of UTF-8 text (256 KiB, SQS's classic message limit).
#: Payloads carry identities only, so real envelopes are a few hundred bytes; a larger message
#: is refused by :meth:`Job.to_json` and dead-lettered on receive (docs/workers.md, "Hostile
#: input").
MAX_ENVELOPE_BYTES = 256 * 1024


def _utf8_size(text: str) -> int:
    """The UTF-8 size of ``text`` in bytes (lone surrogates counted as 3 bytes)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


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
        """Encode the envelope as compact, ASCII-only JSON text.

        Returns:
            The text, at most :data:`MAX_ENVELOPE_BYTES` bytes.

        Raises:
            EncodeError: the envelope nests deeper than :data:`reactor.model.codec.MAX_DEPTH`,
                is larger than :data:`MAX_ENVELOPE_BYTES`, or there is no stack left to
                encode it (never a bare ``RecursionError``).
            TypeError: the payload holds a value :mod:`json` cannot write.
            ValueError: the payload holds a NaN or infinite float.
        """
        envelope = {
            "id": self.id,
            "kind": self.kind,
            "payload": dict(self.payload),
            "attempt": self.attempt,
            "not_before": self.not_before,
        }
        codec.check_depth(envelope, what="job envelope")
        try:
            text = json.dumps(envelope, separators=(",", ":"), allow_nan=False)
        except RecursionError as exc:  # within MAX_DEPTH: the caller's stack is used up
            raise EncodeError(
                f"no stack left to encode the job envelope: {exc}", type_name="Job",
                path="payload",
            ) from exc
        if len(text) > MAX_ENVELOPE_BYTES:  # ASCII: one byte per character
            raise EncodeError(
                f"job envelope is {len(text)} bytes, over MAX_ENVELOPE_BYTES "
                f"({MAX_ENVELOPE_BYTES})", type_name="Job", path="payload",
            )
        return text

    @classmethod
    def from_json(cls, text: str | bytes) -> Job:
        """Decode an envelope produced by :meth:`to_json` (or any foreign message body).

        The kind is NOT checked against :data:`JOB_KINDS` here (a worker dead-letters unknown
        kinds with that reason); only the envelope's shape is. Safe on hostile input: every
        problem is a :class:`DeserializationError` (docs/workers.md, "Hostile input").

        Args:
            text: the message body; ``bytes`` must be UTF-8.

        Returns:
            The job.

        Raises:
            DeserializationError: the body is larger than :data:`MAX_ENVELOPE_BYTES`, not
                UTF-8, not JSON, nested deeper than :data:`reactor.model.codec.MAX_DEPTH`, not
                an object, or a field is missing or has the wrong type. Nothing else, whatever
                the body and the caller's stack depth.
        """
        if not isinstance(text, str | bytes | bytearray):
            raise DeserializationError(
                f"job envelope must be text or bytes, got {type(text).__name__}"
            )
        size = _utf8_size(text) if isinstance(text, str) else len(text)
        if size > MAX_ENVELOPE_BYTES:
            raise DeserializationError(
                f"job envelope is {size} bytes, over MAX_ENVELOPE_BYTES ({MAX_ENVELOPE_BYTES})"
            )
        try:
            data = codec.parse_json(text)
        except DeserializationError as exc:
            raise DeserializationError(f"job envelope is unreadable: {exc}") from exc
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
        body: the raw message body as received: its text when it is UTF-8, else (when
            ``body_encoding`` is ``"base64"``) the standard base64 of its bytes.
        reason: why it was dead-lettered (e.g. ``"unknown job kind 'x'"``, or
            ``"undecodable message: ..."`` for a poison message dead-lettered by ``receive``).
        at: epoch seconds when it was dead-lettered.
        body_encoding: ``"text"`` or ``"base64"`` (docs/workers.md, "Hostile input").
        id: the router's id of this dead letter (unique among its dead letters, the same on
            every read; ``""`` from a router without :class:`DeadLetterAdmin`). It names the
            letter to :meth:`DeadLetterAdmin.get_dead_letter`, ``requeue_dead_letter`` and
            ``purge_dead_letters`` (docs/workers.md, "Dead letters").
    """

    body: str
    reason: str
    at: float
    body_encoding: Literal["text", "base64"] = "text"
    id: str = ""

    @classmethod
    def from_raw(
        cls, raw: str | bytes, reason: str, at: float, letter_id: str = ""
    ) -> DeadLetter:
        """A dead letter keeping ``raw`` exactly: as text when it is UTF-8, else as base64.

        Args:
            raw: the message body as the transport holds it.
            reason: why it was dead-lettered.
            at: epoch seconds.
            letter_id: the router's id of the dead letter (the ``id`` field).

        Returns:
            The dead letter; :meth:`raw_body` gives back ``raw`` (as bytes).
        """
        if isinstance(raw, str):
            return cls(body=raw, reason=reason, at=at, id=letter_id)
        try:
            return cls(body=bytes(raw).decode("utf-8"), reason=reason, at=at, id=letter_id)
        except UnicodeDecodeError:
            return cls(
                body=base64.b64encode(raw).decode("ascii"), reason=reason, at=at,
                body_encoding="base64", id=letter_id,
            )

    def to_job(self) -> Job:
        """The job this dead letter's body encodes, to requeue it.

        Returns:
            The decoded job, exactly as the body holds it (its id, payload and ``attempt``).

        Raises:
            DeserializationError: the body is not a job envelope (a poison message: not UTF-8,
                too large, too deep, not an envelope); the message names the dead letter.
                :meth:`DeadLetterAdmin.requeue_dead_letter` refuses such a letter and keeps it
                (docs/workers.md, "Dead letters").
        """
        try:
            return Job.from_json(self.raw_body())
        except (DeserializationError, ValueError) as exc:
            raise DeserializationError(
                f"dead letter {self.id!r} cannot be requeued: its body is not a job "
                f"envelope ({exc})"
            ) from exc

    def raw_body(self) -> bytes:
        """The body's original bytes (UTF-8 of a text body; a base64 body decoded).

        Raises:
            ValueError: ``body_encoding`` is ``"base64"`` but ``body`` is not valid base64.
        """
        if self.body_encoding == "base64":
            try:
                return base64.b64decode(self.body.encode("ascii"), validate=True)
            except (binascii.Error, UnicodeEncodeError) as exc:
                raise ValueError(f"dead letter body is not base64: {exc}") from exc
        return self.body.encode("utf-8", "surrogatepass")


@runtime_checkable
class JobSink(Protocol):
    """The producer side of a router: what the engine needs (docs/protocol.md#routers).

    The engine, the job handlers and the sweepers only ever enqueue; they never receive. An
    object that is only a sink (a queue fed by this process and drained elsewhere) is enough
    to run reactors, though every built-in router is a whole :class:`Router`.
    """

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        """Queue ``job`` to become visible after ``delay_seconds``.

        Args:
            job: the envelope; a router whose delay is honoured natively may store it
                unchanged, others record ``not_before = now + delay_seconds`` in it.
            delay_seconds: seconds before the job may be received; any finite number >= 0,
                however large (a router whose native delay is bounded re-defers).

        Returns:
            The job id (``job.id``).

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
            EncodeError: the envelope cannot be encoded (:meth:`Job.to_json`).
            RouterError: the backend failed, or the router is closed.
        """
        ...

    def close(self) -> None:
        """Release connections and threads; idempotent (a second call does nothing)."""
        ...


@runtime_checkable
class JobSource(Protocol):
    """The consumer side of a router: what a worker needs (docs/protocol.md#routers).

    :class:`reactor.jobs.worker.Worker` (``reactor worker``) receives deliveries, runs them and
    settles each one with exactly one of :meth:`ack`, :meth:`retry` or :meth:`dead_letter`,
    calling :meth:`extend` meanwhile as a heartbeat. The receipt rules (stale receipts, poison
    messages) are in the module docstring.
    """

    def receive(self, max_jobs: int = 1, wait_seconds: float = 0) -> list[Delivery]:
        """Lease up to ``max_jobs`` due jobs, waiting up to ``wait_seconds`` for one to appear.

        Each returned delivery stays invisible to other receivers for the router's visibility
        timeout (seconds). A message that cannot be decoded (:meth:`Job.from_json` raises) is
        dead-lettered with the reason and its raw body (:meth:`DeadLetter.from_raw`) and not
        returned; it never makes ``receive`` raise, and the messages behind it are still
        received by the same call. ``delivery_count`` counts every delivery of the message,
        those before a :meth:`retry` included.

        Args:
            max_jobs: the most deliveries returned (``<= 0``: none).
            wait_seconds: the longest this call blocks when nothing is due, in seconds (0: do
                not wait).

        Returns:
            The deliveries, possibly none.

        Raises:
            RouterError: the backend failed.
        """
        ...

    def ack(self, delivery: Delivery) -> None:
        """Remove a delivered job for good.

        A stale receipt (module docstring) is a logged no-op: the current delivery stays.

        Args:
            delivery: a delivery :meth:`receive` returned.

        Raises:
            RouterError: the backend failed.
        """
        ...

    def retry(self, delivery: Delivery, delay_seconds: float) -> None:
        """Give the job back to be delivered again after ``delay_seconds``.

        The message is unchanged and keeps its delivery count: the next delivery has
        ``delivery_count == delivery.delivery_count + 1``, which the worker's backoff and
        ``max_deliveries`` rely on (docs/workers.md). The receipt stops being current. A stale
        receipt (module docstring) is a logged no-op: nothing is re-queued and the current
        delivery stays leased.

        Args:
            delivery: a delivery :meth:`receive` returned.
            delay_seconds: seconds before the job is visible again; any finite number >= 0.

        Raises:
            ValueError: ``delay_seconds`` is negative or not finite.
            RouterError: the backend failed.
        """
        ...

    def extend(self, delivery: Delivery, seconds: float) -> None:
        """Keep the job invisible for ``seconds`` from now (heartbeat of long handlers).

        The receipt stays current. A stale receipt (module docstring) is a logged no-op: the
        current delivery's lease is untouched.

        Args:
            delivery: a delivery :meth:`receive` returned.
            seconds: the new lease, counted from now, in seconds.

        Raises:
            ValueError: ``seconds`` is negative or not finite (routers that check it).
            RouterError: the backend failed.
        """
        ...

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        """Move a delivered job to the dead-letter place with ``reason`` (and ack it).

        A stale receipt (module docstring) is a logged no-op: nothing is dead-lettered and the
        current delivery stays.

        Args:
            delivery: a delivery :meth:`receive` returned.
            reason: why (kept as :attr:`DeadLetter.reason`).

        Raises:
            RouterError: the backend failed.
        """
        ...

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """Read dead-lettered messages, oldest first, each with its reason and raw body.

        Args:
            limit: the most letters returned.

        Returns:
            At most ``limit`` dead letters (:class:`DeadLetterAdmin` adds paging by cursor).

        Raises:
            RouterError: the backend failed.
        """
        ...

    def close(self) -> None:
        """Release connections and threads; idempotent (a second call does nothing)."""
        ...


@runtime_checkable
class Router(JobSink, JobSource, Protocol):
    """A queue of jobs with delays, visibility leases and a dead-letter place
    (docs/protocol.md#routers): :class:`JobSink` and :class:`JobSource` together.

    Every adapter implements the whole of it, so one URL serves both the processes that run
    reactors and the workers; ``reactor.configure`` checks a router built from a URL with
    ``isinstance(router, Router)``. The optional capabilities a router may add are
    :class:`DeadLetterAdmin`, the protocols of :mod:`reactor.ports.capabilities` and those of
    :mod:`reactor.ports.inspection`.
    """


@runtime_checkable
class DeadLetterAdmin(Protocol):
    """The optional dead-letter administration capability of a router (docs/workers.md, "Dead
    letters"; docs/writing-an-adapter.md, routers).

    A router offering it gives each :class:`DeadLetter` a stable ``id`` and lets an operator
    page through, show, requeue and purge dead letters (``reactor dead-letters``). It is a
    protocol of its own so :class:`Router` does not grow; check for it with
    ``isinstance(router, DeadLetterAdmin)``. Every built-in router implements it.

    **Requeue semantics.** A requeue moves one dead letter back to the queue: the original
    envelope, unchanged, as a new message (delivery count starts again: its first delivery has
    ``delivery_count == 1``). It is *claim, enqueue, remove*: the caller first claims the dead
    letter exclusively (an atomic server-side step, a claim mark, or a queue lease), then
    enqueues the job, and removes the dead letter last. So two concurrent requeues of one id
    enqueue the job once (the loser finds the letter claimed or gone and returns ``None``), and
    a crash between the enqueue and the removal never loses the job: at worst the dead letter
    stays and a later requeue enqueues it again (at-least-once, like every delivery). Routers
    whose store runs the three steps as one atomic operation (memory, Redis) have no such gap.
    """

    def dead_letters(self, limit: int = 100, cursor: str | None = None) -> list[DeadLetter]:
        """Read dead letters, oldest first, each with its ``id``.

        Args:
            limit: the most letters returned (``<= 0``: none).
            cursor: the ``id`` of the last letter of the previous page (``None``: from the
                oldest); the page holds the letters after it.

        Returns:
            At most ``limit`` dead letters, oldest first.

        Raises:
            ValueError: ``cursor`` is not a dead-letter id this router can place (malformed,
                or, on routers that must look it up, no longer a dead letter).
            RouterError: the backend failed.
        """
        ...

    def get_dead_letter(self, letter_id: str) -> DeadLetter | None:
        """One dead letter by its ``id``.

        Args:
            letter_id: a :attr:`DeadLetter.id`.

        Returns:
            The dead letter, or ``None`` when there is none with that id (never was, requeued
            or purged since, or a malformed id).

        Raises:
            RouterError: the backend failed.
        """
        ...

    def requeue_dead_letter(self, letter_id: str) -> str | None:
        """Move a dead letter back to the queue as a new job message, due now.

        The envelope is enqueued unchanged (same job id, payload and ``attempt``) with a fresh
        delivery count, and the dead letter is removed (see the class docstring for the claim,
        enqueue, remove order and what concurrent callers see).

        Args:
            letter_id: a :attr:`DeadLetter.id`.

        Returns:
            The enqueued job's id (the original job id), or ``None`` when there is no such dead
            letter, or another caller is requeuing it right now.

        Raises:
            DeserializationError: the body is not a job envelope (:meth:`DeadLetter.to_job`):
                nothing is enqueued and the dead letter is kept.
            RouterError: the backend failed.
        """
        ...

    def purge_dead_letters(self, ids: Sequence[str] | None = None) -> int:
        """Delete dead letters for good.

        Args:
            ids: the :attr:`DeadLetter.id` values to delete; ``None`` deletes every dead letter
                of this router's queue (an empty sequence deletes nothing).

        Returns:
            How many dead letters were deleted (ids that name no dead letter are not counted).

        Raises:
            RouterError: the backend failed.
        """
        ...

"""``EngineState``: the engine's typed bookkeeping on one run (docs/protocol.md, "Contexts").

Every fact the engine keeps on a :class:`~reactor.model.context.Context` besides its results,
trace and undo stack — admission, coordination tickets and parked holds, what a parked unit
waits on, dispatched ``async_step`` units, input validation left to a worker, the hand-off
mode, run-control links and a quarantine's original text — is one typed field of the frozen
:class:`EngineState` held in ``Context.engine_state``. Engine code reads the fields and writes
a new value (:func:`dataclasses.replace` or the ``with_*`` methods); nothing is a free-form
key any more.

**Stored shape.** The state is written as a plain JSON object under the document's
``private_data`` key, one key per fact, with the key names and value shapes earlier versions
wrote (so their documents load, and a document written here is read by them too):

========================  ===========================  =================================
stored key                field                        stored value
========================  ===========================  =================================
``admitted``              ``admitted``                 ``true``
``rate_limit_charged``    ``rate_limit_charged``       ``true``
``ordered_lock``          ``ordered_ticket``           ``{"key", "nonce", "epoch"}``
``step_ordered_locks``    ``step_ordered_tickets``     ``{step: {"key", "nonce",
                                                       "epoch"}}``
``parked_holds``          ``parked_holds``             ``{scope: [hold, ...]}``, a hold
                                                       ``{"primitive": "lock", "key",
                                                       "owner"}`` or ``{"primitive":
                                                       "semaphore", "key", "holder"}``
``waiting``               ``waiting``                  ``{"scope", "primitive", "key"}``
``async_steps``           ``async_steps``              ``{step: {"dispatched_at": s}}``
                                                       (epoch seconds)
``validate_inputs``       ``validate_inputs``          ``true``
``argument_error``        ``argument_error``           text
``handed_off``            ``handed_off``               ``"all"``, ``"after"`` or
                                                       ``"before"``
``idempotency_key``       ``links.idempotency_key``    text
``retried_from``          ``links.retried_from``       a run id
``retries``               ``links.retries``            a list of run ids, oldest first
``quarantine``            ``quarantine``               ``{"reason", "original_status",
                                                       "original_document"}``, plus
                                                       ``"original_truncated": true``
``interrupt``             ``interrupt``                ``{"step", "correlation_id",
                                                       "paused_at", "timeout",
                                                       "deadline", "expiry",
                                                       "max_attempts", "attempts"}``
``sleep``                 ``sleep``                    ``{"step", "wake_at", "since"}``
                                                       (epoch seconds, runtime clock)
``cancel``                ``cancel``                   ``{"reason", "rollback",
                                                       "requested_at"}``, plus
                                                       ``"cause": "deadline"`` when the
                                                       run's deadline ended it
``deadline``              ``deadline``                 epoch seconds (runtime clock)
``suspension``            ``suspension``               ``{"reason", "by", "at",
                                                       "resume"}``
``suspend_generation``    ``suspend_generation``       integer (absent: 0)
``failure_hold``          ``failure_hold``             ``{"step", "kind",
                                                       "compensate_pending", "attempt",
                                                       "at", "rewinding"}``
``forked_from``           ``forked_from``              ``{"run_id", "step"}``
``definition``            ``definition``               ``{"fingerprint"}``, plus
                                                       ``"version"`` when the reactor
                                                       has a ``version`` label and
                                                       ``"steps": {step: "8 hex"}``
                                                       (runs stored since step digests)
``needs_version``         ``needs_version``            ``{"step", "rule", "reason",
                                                       "fingerprint", "status", "at"}``
========================  ===========================  =================================

A fact at its default (``False``, ``None``, empty) is not written; a stored ``null`` reads as
the default.

**Unknown keys are kept**, never dropped: they land in :attr:`EngineState.extra` and are
written back unchanged on the next save. A document written by a newer version (a rolling
upgrade, a rollback of a deploy) must neither be quarantined nor lose what that version
recorded just because this one does not know a key.

**Malformed values** (a known key holding the wrong type or an unknown enumeration value)
raise :class:`~reactor.errors.DeserializationError` naming the field, e.g.
``context field 'private_data.parked_holds.post[0].owner' must be str, got int``, so the run is
quarantined like any unreadable run (:mod:`reactor.engine.quarantine`). pydantic validates the
stored shape: strictly (a bool is not an int, an int is not a bool, a string is not a number,
nothing is coerced; epoch seconds are an int or a float), keys inside a record that this version
does not read are ignored as before, and :func:`_refused` turns pydantic's first error into that
message.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Final, Literal, TypeVar, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetPydanticSchema,
    Strict,
    StrictBool,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
)
from pydantic_core import PydanticCustomError

from reactor.errors import DeserializationError
from reactor.model import codec
from reactor.model.records import OrderedTicket
from reactor.model.run_links import RunLinks

__all__ = [
    "QUARANTINE_KEY",
    "STORED_KEYS",
    "AsyncStepRef",
    "CancelRequest",
    "DefinitionStamp",
    "EngineState",
    "FailureHold",
    "ForkOrigin",
    "HandOffMode",
    "HoldPrimitive",
    "InterruptExpiry",
    "KeyedTicket",
    "ParkedHold",
    "PendingInterrupt",
    "PendingSleep",
    "Quarantine",
    "Suspension",
    "VersionHold",
    "Waiting",
    "WaitingPrimitive",
]

#: How a background run was handed to a worker (docs/workers.md, "Background runs").
HandOffMode = Literal["all", "after", "before"]
#: The primitives a parked unit may wait on (docs/coordination.md, "Contention";
#: ``"async_step"``: a reader parked on an unfinished unit, docs/workers.md, "Async steps").
WaitingPrimitive = Literal["lock", "semaphore", "rate_limit", "ordered_lock", "async_step"]
#: The primitives whose holds a park detaches and keeps (docs/coordination.md, "Contention").
HoldPrimitive = Literal["lock", "semaphore"]
#: How an interrupt's timeout is enforced (docs/run-control.md, "Interrupts").
InterruptExpiry = Literal["lazy", "active"]

#: The stored ``private_data`` key of :attr:`EngineState.quarantine` (the masking of views
#: hides the original text kept under it: :func:`reactor.model.masking.mask_document`).
QUARANTINE_KEY: Final = "quarantine"

_ROOT: Final = "private_data"

_T = TypeVar("_T")


def _int_or_float(value: Any) -> Any:
    # pydantic's strict float also takes a Decimal or a Fraction; stored seconds are neither
    if isinstance(value, int | float):
        return value
    raise PydanticCustomError("float_type", "Input should be a valid number")


#: Epoch seconds: an int or a float (never a bool), read as a float.
_Seconds = Annotated[float, Strict(), BeforeValidator(_int_or_float)]


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise PydanticCustomError("finite_number", "must be a finite number")
    return value


#: Epoch seconds that must be finite (a deadline: NaN or an infinity would never compare).
_FiniteSeconds = Annotated[_Seconds, AfterValidator(_finite)]

# ------------------------------------------------------------------------------ values


@dataclass(frozen=True)
class KeyedTicket:
    """An ordered-lock ticket with the key of the line it was taken in (docs/coordination.md,
    "Ordered locks in workers"). Stored as ``{"key", "nonce", "epoch"}``.

    Attributes:
        key: the ordered lock's key.
        nonce: the 1-based position in the batch.
        epoch: the batch generation (0: a legacy ticket, never fenced).
    """

    key: StrictStr
    nonce: StrictInt
    epoch: StrictInt = 0

    @classmethod
    def of(cls, key: str, ticket: OrderedTicket) -> KeyedTicket:
        """The ticket ``ticket`` taken in the line of ``key``."""
        return cls(key=key, nonce=ticket.nonce, epoch=ticket.epoch)

    @property
    def ticket(self) -> OrderedTicket:
        """The place in line, as the ordered-lock client takes it."""
        return OrderedTicket(nonce=self.nonce, epoch=self.epoch)

    def to_json(self) -> dict[str, Any]:
        """The stored form ``{"key", "nonce", "epoch"}``."""
        return {"key": self.key, "nonce": self.nonce, "epoch": self.epoch}

    @classmethod
    def from_json(cls, value: Any, path: str = "ordered_lock") -> KeyedTicket:
        """Read the stored form (a missing ``epoch`` is a legacy ticket: 0; ``path``: where it
        sits, for the error message).

        Raises:
            DeserializationError: the value is malformed (the message names the field).
        """
        return _read(_TICKET, value, path)


@dataclass(frozen=True)
class ParkedHold:
    """A lock or semaphore slot a park detached and kept for the redelivery to re-adopt
    (docs/coordination.md, "Contention"). Stored as ``{"primitive": "lock", "key", "owner"}``
    or ``{"primitive": "semaphore", "key", "holder"}``.

    Attributes:
        primitive: ``"lock"`` or ``"semaphore"``.
        key: the primitive's key.
        holder: the lock's owner, or the semaphore lease's holder token.
    """

    primitive: HoldPrimitive
    key: str
    holder: str

    def to_json(self) -> dict[str, Any]:
        """The stored form (the holder under ``"owner"`` for a lock, ``"holder"`` for a
        semaphore)."""
        name = "owner" if self.primitive == "lock" else "holder"
        return {"primitive": self.primitive, "key": self.key, name: self.holder}

    @classmethod
    def from_json(cls, value: Any, path: str = "parked_holds") -> ParkedHold:
        """Read the stored form (``path``: where it sits, for the error message).

        Raises:
            DeserializationError: the value is malformed (the message names the field).
        """
        return _read(_HOLD, value, path)


@dataclass(frozen=True)
class Waiting:
    """What a parked unit waits on (docs/coordination.md, "Contention"; docs/workers.md,
    "Async steps"). Stored as ``{"scope", "primitive", "key"}``.

    Attributes:
        scope: ``"@reactor"`` for the reactor-level coordination, else the step that parked
            (``None`` when no step was current).
        primitive: ``"lock"``, ``"semaphore"``, ``"rate_limit"``, ``"ordered_lock"``, or
            ``"async_step"`` (a reader parked on an unfinished unit).
        key: the primitive's key, or the ``async_step`` unit's name.
    """

    scope: str | None
    primitive: WaitingPrimitive
    key: str

    def to_json(self) -> dict[str, Any]:
        """The stored form ``{"scope", "primitive", "key"}``."""
        return {"scope": self.scope, "primitive": self.primitive, "key": self.key}

    @classmethod
    def from_json(cls, value: Any, path: str = "waiting") -> Waiting:
        """Read the stored form (``path``: where it sits, for the error message).

        Raises:
            DeserializationError: the value is malformed (the message names the field).
        """
        return _read(_WAITING, value, path)


@dataclass(frozen=True)
class AsyncStepRef:
    """The link of a context to an ``async_step`` unit it dispatched (docs/workers.md,
    "Async steps"). Stored as ``{"dispatched_at": epoch s}``.

    Attributes:
        dispatched_at: epoch seconds (storage clock) of the dispatch.
    """

    dispatched_at: _Seconds

    def to_json(self) -> dict[str, Any]:
        """The stored form ``{"dispatched_at": epoch s}``."""
        return {"dispatched_at": self.dispatched_at}

    @classmethod
    def from_json(cls, value: Any, path: str = "async_steps") -> AsyncStepRef:
        """Read the stored form (``path``: where it sits, for the error message).

        Raises:
            DeserializationError: the value is malformed (the message names the field).
        """
        return _read(_ASYNC_STEP, value, path)


@dataclass(frozen=True)
class Quarantine:
    """Why a run was quarantined and its original text (docs/architecture.md, "Execution
    invariants", "No code from data"; :mod:`reactor.engine.quarantine`). Stored as
    ``{"reason", "original_status", "original_document"}``, plus ``"original_truncated":
    true`` when only a prefix of the text was kept. Every view masks the secrets of
    ``original_document`` (docs/security.md, "What each view shows").

    Attributes:
        reason: ``"<ErrorClass>: <message>"`` of the decode error.
        original_status: the status the unreadable record was stored with.
        original_document: the unreadable record's text, verbatim (or its prefix).
        original_truncated: only a prefix of the text was kept (the whole did not fit the
            size limit).
    """

    reason: StrictStr
    original_status: StrictStr
    original_document: StrictStr
    original_truncated: StrictBool = False

    def truncated(self, chars: int) -> Quarantine:
        """This quarantine keeping only the first ``chars`` characters of the text.

        Args:
            chars: how many characters to keep.

        Returns:
            A new value with :attr:`original_truncated` set.
        """
        return replace(self, original_document=self.original_document[:chars],
                       original_truncated=True)

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        stored: dict[str, Any] = {
            "reason": self.reason,
            "original_status": self.original_status,
            "original_document": self.original_document,
        }
        if self.original_truncated:
            stored["original_truncated"] = True
        return stored

    @classmethod
    def from_json(cls, value: Any, path: str = QUARANTINE_KEY) -> Quarantine:
        """Read the stored form (``path``: where it sits, for the error message).

        Raises:
            DeserializationError: the value is malformed (the message names the field).
        """
        return _read(_QUARANTINE, value, path)


@dataclass(frozen=True)
class PendingInterrupt:
    """The interrupt a ``paused`` run waits at (docs/run-control.md, "Interrupts"). Stored
    on the root run as ``{"step", "correlation_id", "paused_at", "timeout", "deadline",
    "expiry", "max_attempts", "attempts"}``, plus ``"traceparent"``/``"tracestate"`` when the
    pause was traced.

    Attributes:
        step: the interrupt's step path (``"approval"``, or ``"review.approval"`` inside the
            child composed by step ``review``).
        correlation_id: the id a resume may name instead of the run id, or ``None``.
        paused_at: epoch seconds on the runtime clock when the run paused.
        timeout: seconds the interrupt waits, or ``None`` (no timeout).
        deadline: ``paused_at + timeout`` (epoch seconds, runtime clock), or ``None``.
        expiry: ``"lazy"`` or ``"active"``; ``None`` without a timeout.
        max_attempts: invalid payloads accepted before the run fails (>= 1).
        attempts: invalid payloads counted so far, as last recorded on the run (the claims
            store's counter is authoritative: docs/protocol.md, "Claims").
        traceparent: the W3C ``traceparent`` of the span that paused the run, when a tracing
            middleware was active (the resumed run's spans link to it: docs/observability.md,
            "Resumed runs"); else ``None``. Stored only when set.
        tracestate: that span's ``tracestate`` (vendor data), or ``None``; stored only when
            set.
    """

    step: StrictStr
    correlation_id: StrictStr | None = None
    paused_at: _Seconds = 0.0
    timeout: _Seconds | None = None
    deadline: _Seconds | None = None
    expiry: InterruptExpiry | None = None
    max_attempts: StrictInt = 1
    attempts: StrictInt = 0
    traceparent: StrictStr | None = None
    tracestate: StrictStr | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored form (every field, ``null`` where unset; the trace fields only when
        set, so an untraced interrupt is stored as before they existed)."""
        stored: dict[str, Any] = {
            "step": self.step, "correlation_id": self.correlation_id,
            "paused_at": self.paused_at, "timeout": self.timeout, "deadline": self.deadline,
            "expiry": self.expiry, "max_attempts": self.max_attempts,
            "attempts": self.attempts,
        }
        if self.traceparent is not None:
            stored["traceparent"] = self.traceparent
        if self.tracestate is not None:
            stored["tracestate"] = self.tracestate
        return stored

    @classmethod
    def from_json(cls, value: Any, path: str = "interrupt") -> PendingInterrupt:
        """Read the stored form (``path``: where it sits, for the error message).

        Raises:
            DeserializationError: the value is malformed (the message names the field).
        """
        return _read(_INTERRUPT, value, path)


@dataclass(frozen=True)
class PendingSleep:
    """The ``sleep`` step a ``paused`` run sleeps at (docs/schedules.md, "Durable sleep").
    Stored on the root run as ``{"step", "wake_at", "since"}``; a run stored before sleeps
    existed has none. It stays on the run while the woken run runs again, until the sleep
    step completes, so the wake time is computed once.

    Attributes:
        step: the sleep's step path (``"nap"``, or ``"child.nap"`` inside the child composed
            by step ``child``).
        wake_at: when the run wakes, epoch seconds on the runtime clock.
        since: when the run reached the sleep, epoch seconds on the runtime clock.
    """

    step: StrictStr
    wake_at: _FiniteSeconds
    since: _FiniteSeconds

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return {"step": self.step, "wake_at": self.wake_at, "since": self.since}


@dataclass(frozen=True)
class CancelRequest:
    """A request to cancel a run (docs/run-control.md, "Cancel"): the claim
    ``Reactor.cancel`` makes in the claims store (its text is :meth:`encode`), and, once a
    cancel started, the record kept on the root run. Stored on the run as ``{"reason",
    "rollback", "requested_at"}``.

    Attributes:
        reason: why the run was cancelled (the caller's text, shown in views), or ``None``.
        rollback: whether the run's completed work is rolled back (``False``: it is kept).
        requested_at: epoch seconds on the runtime clock when the cancel was requested.
        cause: ``"deadline"`` when the run's deadline passed (docs/concepts.md, "Run
            deadlines": the run ends ``failed`` with ``RunDeadlineExceeded``, not
            ``cancelled``); ``None`` for a cancel asked for by ``Reactor.cancel``.
    """

    reason: StrictStr | None = None
    rollback: StrictBool = True
    requested_at: _Seconds = 0.0
    cause: Literal["deadline"] | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored form (every field, ``null`` where unset; ``cause`` only when set, so a
        cancel's stored form is what earlier versions wrote and read)."""
        stored: dict[str, Any] = {"reason": self.reason, "rollback": self.rollback,
                                  "requested_at": self.requested_at}
        if self.cause is not None:
            stored["cause"] = self.cause
        return stored

    @classmethod
    def from_json(cls, value: Any, path: str = "cancel") -> CancelRequest:
        """Read the stored form (``path``: where it sits, for the error message).

        Raises:
            DeserializationError: the value is malformed (the message names the field).
        """
        return _read(_CANCEL, value, path)

    def encode(self) -> str:
        """The claim's text for ``ClaimStore.claim_interrupt_resume`` (codec JSON)."""
        return codec.dumps(self.to_json())

    @classmethod
    def decode(cls, text: str) -> CancelRequest:
        """Read a claim's text back.

        Args:
            text: what :meth:`encode` wrote.

        Returns:
            The request.

        Raises:
            DeserializationError: the text is not a request this version wrote (the message
                names the field).
        """
        return cls.from_json(codec.loads(text), "cancel claim")


# ------------------------------------------------------------------------------ stored shape
#
# What pydantic validates a stored value against. KeyedTicket, AsyncStepRef and Quarantine are
# stored field for field (their fields are annotated strict); a hold and ``waiting`` go through
# a stored record each (a hold's holder is stored under ``owner`` or ``holder``; a ``waiting``
# may lack its ``scope``). Containers take any mapping as an object, lists only a list.


class _StoredLock(BaseModel):
    primitive: Literal["lock"]
    key: StrictStr
    owner: StrictStr

    def value(self) -> ParkedHold:
        return ParkedHold("lock", self.key, self.owner)


class _StoredSemaphore(BaseModel):
    primitive: Literal["semaphore"]
    key: StrictStr
    holder: StrictStr

    def value(self) -> ParkedHold:
        return ParkedHold("semaphore", self.key, self.holder)


class _StoredWaiting(BaseModel):
    scope: StrictStr | None = None
    primitive: WaitingPrimitive
    key: StrictStr

    def value(self) -> Waiting:
        return Waiting(self.scope, self.primitive, self.key)


def _stored_as(stored: Any) -> GetPydanticSchema:
    """Validate a value as its stored record ``stored``, then read it (``.value()``)."""
    return GetPydanticSchema(
        lambda _, handler: handler(Annotated[stored, AfterValidator(lambda v: v.value())])
    )


_Hold = Annotated[
    ParkedHold,
    _stored_as(Annotated[_StoredLock | _StoredSemaphore, Field(discriminator="primitive")]),
]
_Waiting = Annotated[Waiting, _stored_as(_StoredWaiting)]
_List = Annotated[list[_T], Strict()]


@dataclass(frozen=True)
class Suspension:
    """An operator's hold on a run (docs/operations.md, "Suspend and unsuspend"): the claim
    ``Reactor.suspend`` makes in the claims store (its text is :meth:`encode`), and, while
    the run is ``suspended``, the record kept on it. Stored as ``{"reason", "by", "at",
    "resume"}``.

    Attributes:
        reason: why (the operator's text), or ``None``.
        by: who asked (the operator's text), or ``None``.
        at: epoch seconds on the runtime clock when it was asked for.
        resume: the status ``Reactor.unsuspend`` gives the run back: ``"running"`` (it
            continues at its next step, in a worker) or ``"paused"`` (it waits at its
            interrupt again).
    """

    reason: StrictStr | None = None
    by: StrictStr | None = None
    at: _Seconds = 0.0
    resume: Literal["running", "paused"] = "running"

    def to_json(self) -> dict[str, Any]:
        """The stored form (every field, ``null`` where unset)."""
        return {"reason": self.reason, "by": self.by, "at": self.at, "resume": self.resume}

    @classmethod
    def from_json(cls, value: Any, path: str = "suspension") -> Suspension:
        """Read the stored form (``path``: where it sits, for the error message).

        Raises:
            DeserializationError: the value is malformed (the message names the field).
        """
        return _read(_SUSPENSION, value, path)

    def encode(self) -> str:
        """The claim's text for ``ClaimStore.claim_interrupt_resume`` (codec JSON)."""
        return codec.dumps(self.to_json())

    @classmethod
    def decode(cls, text: str) -> Suspension:
        """Read a claim's text back.

        Raises:
            DeserializationError: the text is not a request this version wrote.
        """
        return cls.from_json(codec.loads(text), "suspend claim")


@dataclass(frozen=True)
class FailureHold:
    """A failed run held before its rollback (``on_failure="pause"``; docs/operations.md,
    "Pause, rewind, fork"): what the rollback it deferred needs, kept on the run while it is
    ``failed_paused``. The failure itself (error, step) is the run's ``failure``. Stored as
    ``{"step", "kind", "compensate_pending", "attempt", "at", "rewinding"}``.

    Attributes:
        step: the step that failed.
        kind: its kind (``"step"``, ``"compose"``, ``"map"``, ...).
        compensate_pending: its body started (a leaf step): a rollback compensates it first,
            as the failure path would have.
        attempt: the attempts it used, or ``None`` when none was counted.
        at: epoch seconds on the runtime clock when the run was held.
        rewinding: the step a rewind started from while it undoes the steps it re-runs (a
            rewind cut off by a crash is continued from there), else ``None``.
    """

    step: StrictStr
    kind: StrictStr
    compensate_pending: StrictBool = False
    attempt: StrictInt | None = None
    at: _Seconds = 0.0
    rewinding: StrictStr | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored form (every field, ``null`` where unset)."""
        return {
            "step": self.step, "kind": self.kind,
            "compensate_pending": self.compensate_pending, "attempt": self.attempt,
            "at": self.at, "rewinding": self.rewinding,
        }

    @classmethod
    def from_json(cls, value: Any, path: str = "failure_hold") -> FailureHold:
        """Read the stored form (``path``: where it sits, for the error message).

        Raises:
            DeserializationError: the value is malformed (the message names the field).
        """
        return _read(_FAILURE_HOLD, value, path)


@dataclass(frozen=True)
class ForkOrigin:
    """Where a forked run came from (docs/operations.md, "Pause, rewind, fork"). Stored as
    ``{"run_id", "step"}``.

    Attributes:
        run_id: the run it was forked from (left as it was).
        step: the step the fork started from: it and the steps after it ran in the fork.
    """

    run_id: StrictStr
    step: StrictStr

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return {"run_id": self.run_id, "step": self.step}


@dataclass(frozen=True)
class DefinitionStamp:
    """Which definition of its reactor a run was started under (docs/deploys.md,
    "Fingerprints"). Stored as ``{"fingerprint"}`` plus ``"version"`` when set and ``"steps"``
    (the per-step shape digests) when known; a run stored before fingerprints has none, and
    one stored before step digests has no ``"steps"``.

    Attributes:
        fingerprint: the hash of the reactor's shape (16 hex digits;
            ``reactor.dsl.fingerprint``).
        version: the reactor's ``version`` label, or ``None``.
        steps: step name -> the 8-hex digest of that step's shape, for every declared step
            (docs/deploys.md, "Compatibility rules"); ``None`` for a run stored without them.
            Not compared: two stamps are equal when fingerprint and label are.
    """

    fingerprint: StrictStr
    version: StrictStr | None = None
    steps: dict[StrictStr, StrictStr] | None = field(
        default=None, compare=False, hash=False, repr=False
    )

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        stored: dict[str, Any] = {"fingerprint": self.fingerprint}
        if self.version is not None:
            stored["version"] = self.version
        if self.steps is not None:
            stored["steps"] = dict(self.steps)
        return stored


@dataclass(frozen=True)
class VersionHold:
    """Why a ``needs_version`` run waits (docs/deploys.md, "Compatibility rules"). Stored as
    ``{"step", "rule", "reason", "fingerprint", "status", "at"}``.

    Attributes:
        step: the step the rule names.
        rule: which rule refused the run: ``"completed_step_removed"``,
            ``"completed_step_changed"``, ``"undo_removed"``, ``"current_step_removed"`` or
            ``"pending_step_rewired"``.
        reason: the reason in words (names the run, the step and the rule).
        fingerprint: the fingerprint of the definition that refused it.
        status: the status the run had before it was held (``running``), restored when
            ``Reactor.resume_version`` continues it.
        at: when it was held, epoch seconds on the runtime clock.
    """

    step: StrictStr
    rule: StrictStr
    reason: StrictStr
    fingerprint: StrictStr
    status: StrictStr
    at: _Seconds

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return {"step": self.step, "rule": self.rule, "reason": self.reason,
                "fingerprint": self.fingerprint, "status": self.status, "at": self.at}


class _StoredState(BaseModel):
    """The stored ``private_data`` object: one field per known key, named as stored; ``None``
    for an absent key or a stored ``null``; any other key is kept, unread, in ``model_extra``."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, Any] = Field(init=False)

    admitted: StrictBool | None = None
    rate_limit_charged: StrictBool | None = None
    ordered_lock: KeyedTicket | None = None
    step_ordered_locks: dict[StrictStr, KeyedTicket] | None = None
    parked_holds: dict[StrictStr, _List[_Hold]] | None = None
    waiting: _Waiting | None = None
    async_steps: dict[StrictStr, AsyncStepRef] | None = None
    validate_inputs: StrictBool | None = None
    argument_error: StrictStr | None = None
    handed_off: HandOffMode | None = None
    idempotency_key: StrictStr | None = None
    retried_from: StrictStr | None = None
    retries: _List[StrictStr] | None = None
    quarantine: Quarantine | None = None
    interrupt: PendingInterrupt | None = None
    sleep: PendingSleep | None = None
    cancel: CancelRequest | None = None
    deadline: _FiniteSeconds | None = None
    suspension: Suspension | None = None
    suspend_generation: StrictInt | None = None
    failure_hold: FailureHold | None = None
    forked_from: ForkOrigin | None = None
    definition: DefinitionStamp | None = None
    needs_version: VersionHold | None = None


#: Every ``private_data`` key :class:`EngineState` reads as a typed field (any other key is
#: kept in :attr:`EngineState.extra`).
STORED_KEYS: Final[frozenset[str]] = frozenset(_StoredState.model_fields)
assert QUARANTINE_KEY in STORED_KEYS

_STATE: Final = TypeAdapter(_StoredState)
_TICKET: Final = TypeAdapter(KeyedTicket)
_HOLD: Final = TypeAdapter(_Hold)
_WAITING: Final = TypeAdapter(_Waiting)
_ASYNC_STEP: Final = TypeAdapter(AsyncStepRef)
_QUARANTINE: Final = TypeAdapter(Quarantine)
_INTERRUPT: Final = TypeAdapter(PendingInterrupt)
_CANCEL: Final = TypeAdapter(CancelRequest)
_SUSPENSION: Final = TypeAdapter(Suspension)
_FAILURE_HOLD: Final = TypeAdapter(FailureHold)


@dataclass(frozen=True)
class EngineState:
    """The engine's bookkeeping on one run: one typed field per fact (see the module docstring
    for the stored shape). Immutable: update with :func:`dataclasses.replace` or the
    ``with_*`` methods and assign the result to ``Context.engine_state``.

    Attributes:
        admitted: the run passed its reactor-level coordination once; parks, retries and
            redeliveries never charge or period-check it again (docs/workers.md,
            "Decisions", "Snooze counting").
        rate_limit_charged: the reactor-level rate limit was charged (once per run).
        ordered_ticket: the run's place in its reactor-level ordered lock, or ``None``.
        step_ordered_tickets: step name -> that step's ordered-lock ticket.
        parked_holds: scope (``"@reactor"`` or a step name) -> the holds a park detached and
            kept for the redelivery (docs/coordination.md, "Contention"); never an empty
            tuple.
        waiting: what the parked run (or one of its steps) waits on, or ``None``.
        async_steps: ``async_step`` unit name -> its dispatch link; a unit listed here is
            complete for scheduling (docs/workers.md, "Async steps").
        validate_inputs: the stored inputs are raw: the worker validates them first (a
            ``Background(all=True)`` run, a pending fan-out element).
        argument_error: a pending fan-out element whose arguments could not be resolved: the
            reason (the element fails with it when its job runs); else ``None``.
        handed_off: how the run was handed to a worker (docs/workers.md, "Background
            runs"), or ``None``.
        links: the run-control links (docs/run-control.md).
        quarantine: set on a quarantine document only (:mod:`reactor.engine.quarantine`).
        interrupt: the interrupt a ``paused`` run waits at (docs/run-control.md,
            "Interrupts"), else ``None``.
        sleep: the sleep step the run sleeps at, or woke from and has not passed yet
            (docs/schedules.md, "Durable sleep"), else ``None``.
        cancel: set once a cancel of the run started (docs/run-control.md, "Cancel"): the
            request it carries out; else ``None``.
        deadline: the run's deadline, epoch seconds on the runtime clock (docs/concepts.md,
            "Run deadlines"), or ``None``.
        suspension: set while the run is ``suspended`` by an operator (docs/operations.md,
            "Suspend and unsuspend"), else ``None``.
        suspend_generation: how many times the run was unsuspended: the claim path of the
            next suspend request is ``@suspend.<generation>``.
        failure_hold: set while the run is ``failed_paused`` (``on_failure="pause"``;
            docs/operations.md, "Pause, rewind, fork"), else ``None``.
        forked_from: the run and step a forked run started from, else ``None``.
        definition: the definition the run was started under (docs/deploys.md,
            "Fingerprints"); ``None`` for a run stored before fingerprints existed.
        needs_version: set while the run is ``needs_version`` (docs/deploys.md,
            "Compatibility rules"): the rule and step that refused it; else ``None``.
        extra: stored ``private_data`` keys this version does not know, kept as read and
            written back unchanged (never one of :data:`STORED_KEYS`).

    Raises:
        ValueError: (on construction) ``extra`` names a key of :data:`STORED_KEYS`.
    """

    admitted: bool = False
    rate_limit_charged: bool = False
    ordered_ticket: KeyedTicket | None = None
    step_ordered_tickets: Mapping[str, KeyedTicket] = field(default_factory=dict)
    parked_holds: Mapping[str, tuple[ParkedHold, ...]] = field(default_factory=dict)
    waiting: Waiting | None = None
    async_steps: Mapping[str, AsyncStepRef] = field(default_factory=dict)
    validate_inputs: bool = False
    argument_error: str | None = None
    handed_off: HandOffMode | None = None
    links: RunLinks = field(default_factory=RunLinks)
    quarantine: Quarantine | None = None
    interrupt: PendingInterrupt | None = None
    sleep: PendingSleep | None = None
    cancel: CancelRequest | None = None
    deadline: float | None = None
    suspension: Suspension | None = None
    suspend_generation: int = 0
    failure_hold: FailureHold | None = None
    forked_from: ForkOrigin | None = None
    definition: DefinitionStamp | None = None
    needs_version: VersionHold | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Private copies: a caller's dict changed later never changes this value.
        object.__setattr__(self, "step_ordered_tickets", dict(self.step_ordered_tickets))
        object.__setattr__(
            self, "parked_holds",
            {scope: tuple(holds) for scope, holds in self.parked_holds.items() if holds},
        )
        object.__setattr__(self, "async_steps", dict(self.async_steps))
        object.__setattr__(self, "extra", dict(self.extra))
        clash = sorted(STORED_KEYS.intersection(self.extra))
        if clash:
            raise ValueError(f"EngineState.extra must not hold the stored keys {clash}")

    # -------------------------------------------------------------- updates

    def with_parked_holds(self, scope: str, holds: Iterable[ParkedHold]) -> EngineState:
        """This state with ``scope``'s parked holds set to ``holds`` (none: the scope is
        removed).

        Args:
            scope: ``"@reactor"`` or a step name.
            holds: the holds to keep for the redelivery.

        Returns:
            A new value.
        """
        parked = dict(self.parked_holds)
        kept = tuple(holds)
        if kept:
            parked[scope] = kept
        else:
            parked.pop(scope, None)
        return replace(self, parked_holds=parked)

    def with_step_ticket(self, step: str, ticket: KeyedTicket | None) -> EngineState:
        """This state with ``step``'s ordered-lock ticket set (``None``: removed).

        Args:
            step: the step name.
            ticket: its ticket, or ``None``.

        Returns:
            A new value.
        """
        tickets = dict(self.step_ordered_tickets)
        if ticket is None:
            tickets.pop(step, None)
        else:
            tickets[step] = ticket
        return replace(self, step_ordered_tickets=tickets)

    def with_async_step(self, step: str, ref: AsyncStepRef) -> EngineState:
        """This state with the ``async_step`` unit ``step`` recorded as dispatched.

        Args:
            step: the unit's name.
            ref: its dispatch link.

        Returns:
            A new value.
        """
        return replace(self, async_steps={**self.async_steps, step: ref})

    # -------------------------------------------------------------- stored form

    def to_json(self) -> dict[str, Any]:
        """The stored ``private_data`` object (see the module docstring): defaults are left
        out, :attr:`extra` is written back as it was read.

        Returns:
            A plain dict for the codec (its values are JSON, except what :attr:`extra` holds).
        """
        links = self.links
        stored = {
            "admitted": True if self.admitted else None,
            "rate_limit_charged": True if self.rate_limit_charged else None,
            "ordered_lock": None if self.ordered_ticket is None else self.ordered_ticket.to_json(),
            "step_ordered_locks": {
                step: ticket.to_json() for step, ticket in self.step_ordered_tickets.items()
            } or None,
            "parked_holds": {
                scope: [hold.to_json() for hold in holds]
                for scope, holds in self.parked_holds.items()
            } or None,
            "waiting": None if self.waiting is None else self.waiting.to_json(),
            "async_steps": {
                step: ref.to_json() for step, ref in self.async_steps.items()
            } or None,
            "validate_inputs": True if self.validate_inputs else None,
            "argument_error": self.argument_error,
            "handed_off": self.handed_off,
            "idempotency_key": links.idempotency_key,
            "retried_from": links.retried_from,
            "retries": list(links.retries) or None,
            QUARANTINE_KEY: None if self.quarantine is None else self.quarantine.to_json(),
            "interrupt": None if self.interrupt is None else self.interrupt.to_json(),
            "sleep": None if self.sleep is None else self.sleep.to_json(),
            "cancel": None if self.cancel is None else self.cancel.to_json(),
            "deadline": self.deadline,
            "suspension": None if self.suspension is None else self.suspension.to_json(),
            "suspend_generation": self.suspend_generation or None,
            "failure_hold": None if self.failure_hold is None else self.failure_hold.to_json(),
            "forked_from": None if self.forked_from is None else self.forked_from.to_json(),
            "definition": None if self.definition is None else self.definition.to_json(),
            "needs_version": (
                None if self.needs_version is None else self.needs_version.to_json()
            ),
        }
        return {**{k: v for k, v in stored.items() if v is not None}, **self.extra}

    @classmethod
    def from_json(cls, value: Any) -> EngineState:
        """Read a stored ``private_data`` object (this version's, or an earlier one's: the
        shape did not change).

        Args:
            value: the decoded ``private_data`` value.

        Returns:
            The state; unknown keys are kept in :attr:`extra`.

        Raises:
            DeserializationError: ``value`` is not an object, or a known key holds a
                malformed value (the message names the field).
        """
        stored = _read(_STATE, value, _ROOT)
        return cls(
            admitted=stored.admitted or False,
            rate_limit_charged=stored.rate_limit_charged or False,
            ordered_ticket=stored.ordered_lock,
            step_ordered_tickets=stored.step_ordered_locks or {},
            parked_holds={
                scope: tuple(holds) for scope, holds in (stored.parked_holds or {}).items()
            },
            waiting=stored.waiting,
            async_steps=stored.async_steps or {},
            validate_inputs=stored.validate_inputs or False,
            argument_error=stored.argument_error,
            handed_off=stored.handed_off,
            links=RunLinks(
                stored.idempotency_key, stored.retried_from, tuple(stored.retries or ())
            ),
            quarantine=stored.quarantine,
            interrupt=stored.interrupt,
            sleep=stored.sleep,
            cancel=stored.cancel,
            deadline=stored.deadline,
            suspension=stored.suspension,
            suspend_generation=stored.suspend_generation or 0,
            failure_hold=stored.failure_hold,
            forked_from=stored.forked_from,
            definition=stored.definition,
            needs_version=stored.needs_version,
            extra=stored.model_extra or {},
        )


# ------------------------------------------------------------------------------ errors

#: The stored type a pydantic type error expects, as the messages name it.
_EXPECTED: Final = {
    "bool_type": "bool", "string_type": "str", "int_type": "int", "float_type": "a number",
    "list_type": "a list", "dict_type": "an object", "model_type": "an object",
    "model_attributes_type": "an object", "dataclass_type": "an object",
}
_HOLD_TAGS: Final = frozenset(get_args(HoldPrimitive))


def _read(adapter: TypeAdapter[_T], value: Any, path: str) -> _T:
    """``value`` validated by ``adapter``; a malformed value raises
    :class:`~reactor.errors.DeserializationError` naming the field below ``path``."""
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        # ``from None``: pydantic's text quotes the stored values (a quarantine's original text)
        raise _refused(exc, path) from None


def _refused(exc: ValidationError, path: str) -> DeserializationError:
    """pydantic's first error as ``context field '<path>' ...``: the location joined to
    ``path`` (``.name``, ``[index]``; the variant tag pydantic puts after a hold's index is no
    level of the stored value), then ``has no '<name>'`` (missing), ``keys must be str``, ``must
    be one of <choices>, got <value>`` (an enumeration) or ``must be <type>, got <type>``."""
    error = exc.errors(include_url=False)[0]
    kind, loc, got = error["type"], error["loc"], error["input"]
    if loc and loc[-1] == "[key]":  # a nested object's key: pydantic checks it as a str
        kind, loc = "invalid_key", loc[:-1]
    parts = [path]
    for i, step in enumerate(loc):
        if isinstance(step, int):
            parts.append(f"[{step}]")
        elif not (step in _HOLD_TAGS and (i == 0 or isinstance(loc[i - 1], int))):
            parts.append(f".{step}")
    where, parent = "".join(parts), "".join(parts[:-1])
    if kind == "missing":
        return DeserializationError(f"context field {parent!r} has no {loc[-1]!r}")
    if kind == "invalid_key":
        return DeserializationError(
            f"context field {parent!r} keys must be str, got {type(got).__name__}"
        )
    if kind == "union_tag_not_found":
        return DeserializationError(f"context field {where!r} has no 'primitive'")
    if kind in ("literal_error", "union_tag_invalid"):
        ctx = error.get("ctx", {})
        if kind == "union_tag_invalid":
            where, got = f"{where}.primitive", ctx["tag"]
        choices = str(ctx.get("expected") or ctx.get("expected_tags"))  # "'a', 'b' or 'c'"
        choices = choices.replace("'", "").replace(" or ", ", ")
        return DeserializationError(
            f"context field {where!r} must be one of {choices}, got {got!r}"
        )
    if kind in _EXPECTED:
        return DeserializationError(
            f"context field {where!r} must be {_EXPECTED[kind]}, got {type(got).__name__}"
        )
    return DeserializationError(f"context field {where!r} is malformed: {error['msg']}")

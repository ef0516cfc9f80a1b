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
quarantined like any unreadable run (:mod:`reactor.engine.quarantine`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, NoReturn, TypeVar, cast, get_args

from reactor.errors import DeserializationError
from reactor.model.records import OrderedTicket
from reactor.model.run_links import RunLinks

__all__ = [
    "QUARANTINE_KEY",
    "STORED_KEYS",
    "AsyncStepRef",
    "EngineState",
    "HandOffMode",
    "HoldPrimitive",
    "KeyedTicket",
    "ParkedHold",
    "Quarantine",
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

_ADMITTED: Final = "admitted"
_RATE_LIMIT_CHARGED: Final = "rate_limit_charged"
_ORDERED_TICKET: Final = "ordered_lock"
_STEP_ORDERED_TICKETS: Final = "step_ordered_locks"
_PARKED_HOLDS: Final = "parked_holds"
_WAITING: Final = "waiting"
_ASYNC_STEPS: Final = "async_steps"
_VALIDATE_INPUTS: Final = "validate_inputs"
_ARGUMENT_ERROR: Final = "argument_error"
_HANDED_OFF: Final = "handed_off"
_IDEMPOTENCY_KEY: Final = "idempotency_key"
_RETRIED_FROM: Final = "retried_from"
_RETRIES: Final = "retries"
#: The stored ``private_data`` key of :attr:`EngineState.quarantine` (the masking of views
#: hides the original text kept under it: :func:`reactor.model.masking.mask_document`).
QUARANTINE_KEY: Final = "quarantine"

#: Every ``private_data`` key :class:`EngineState` reads as a typed field (any other key is
#: kept in :attr:`EngineState.extra`).
STORED_KEYS: Final[frozenset[str]] = frozenset({
    _ADMITTED, _RATE_LIMIT_CHARGED, _ORDERED_TICKET, _STEP_ORDERED_TICKETS, _PARKED_HOLDS,
    _WAITING, _ASYNC_STEPS, _VALIDATE_INPUTS, _ARGUMENT_ERROR, _HANDED_OFF, _IDEMPOTENCY_KEY,
    _RETRIED_FROM, _RETRIES, QUARANTINE_KEY,
})

_ROOT: Final = "private_data"

_T = TypeVar("_T")


# ------------------------------------------------------------------------------ reading


def _malformed(path: str, expected: str, value: Any) -> NoReturn:
    raise DeserializationError(
        f"context field {path!r} must be {expected}, got {type(value).__name__}"
    )


def _object(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        _malformed(path, "an object", value)
    return value


def _field(obj: Mapping[str, Any], name: str, path: str) -> Any:
    if name not in obj:
        raise DeserializationError(f"context field {path!r} has no {name!r}")
    return obj[name]


def _text(value: Any, path: str) -> str:
    if not isinstance(value, str):
        _malformed(path, "str", value)
    return value


def _flag(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        _malformed(path, "bool", value)
    return value


def _integer(value: Any, path: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        _malformed(path, "int", value)
    return value


def _seconds(value: Any, path: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        _malformed(path, "a number", value)
    return float(value)


def _choice(value: Any, choices: tuple[str, ...], path: str) -> str:
    if not isinstance(value, str) or value not in choices:
        raise DeserializationError(
            f"context field {path!r} must be one of {', '.join(choices)}, got {value!r}"
        )
    return value


def _entries(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        _malformed(path, "a list", value)
    return value


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

    key: str
    nonce: int
    epoch: int = 0

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
        """Read the stored form (a missing ``epoch`` is a legacy ticket: 0).

        Args:
            value: the stored value.
            path: where it sits, for the error message.

        Raises:
            DeserializationError: the value is malformed.
        """
        obj = _object(value, path)
        return cls(
            key=_text(_field(obj, "key", path), f"{path}.key"),
            nonce=_integer(_field(obj, "nonce", path), f"{path}.nonce"),
            epoch=_integer(obj.get("epoch", 0), f"{path}.epoch"),
        )


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
        """Read the stored form.

        Args:
            value: the stored value.
            path: where it sits, for the error message.

        Raises:
            DeserializationError: the value is malformed.
        """
        obj = _object(value, path)
        primitive = cast(HoldPrimitive, _choice(
            _field(obj, "primitive", path), get_args(HoldPrimitive), f"{path}.primitive"
        ))
        name = "owner" if primitive == "lock" else "holder"
        return cls(
            primitive=primitive,
            key=_text(_field(obj, "key", path), f"{path}.key"),
            holder=_text(_field(obj, name, path), f"{path}.{name}"),
        )


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
        """Read the stored form.

        Args:
            value: the stored value.
            path: where it sits, for the error message.

        Raises:
            DeserializationError: the value is malformed.
        """
        obj = _object(value, path)
        scope = obj.get("scope")
        primitive = _choice(
            _field(obj, "primitive", path), get_args(WaitingPrimitive), f"{path}.primitive"
        )
        return cls(
            scope=None if scope is None else _text(scope, f"{path}.scope"),
            primitive=cast(WaitingPrimitive, primitive),
            key=_text(_field(obj, "key", path), f"{path}.key"),
        )


@dataclass(frozen=True)
class AsyncStepRef:
    """The link of a context to an ``async_step`` unit it dispatched (docs/workers.md,
    "Async steps"). Stored as ``{"dispatched_at": epoch s}``.

    Attributes:
        dispatched_at: epoch seconds (storage clock) of the dispatch.
    """

    dispatched_at: float

    def to_json(self) -> dict[str, Any]:
        """The stored form ``{"dispatched_at": epoch s}``."""
        return {"dispatched_at": self.dispatched_at}

    @classmethod
    def from_json(cls, value: Any, path: str = "async_steps") -> AsyncStepRef:
        """Read the stored form.

        Args:
            value: the stored value.
            path: where it sits, for the error message.

        Raises:
            DeserializationError: the value is malformed.
        """
        obj = _object(value, path)
        return cls(_seconds(_field(obj, "dispatched_at", path), f"{path}.dispatched_at"))


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

    reason: str
    original_status: str
    original_document: str
    original_truncated: bool = False

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
        """Read the stored form.

        Args:
            value: the stored value.
            path: where it sits, for the error message.

        Raises:
            DeserializationError: the value is malformed.
        """
        obj = _object(value, path)
        return cls(
            reason=_text(_field(obj, "reason", path), f"{path}.reason"),
            original_status=_text(
                _field(obj, "original_status", path), f"{path}.original_status"
            ),
            original_document=_text(
                _field(obj, "original_document", path), f"{path}.original_document"
            ),
            original_truncated=_flag(
                obj.get("original_truncated", False), f"{path}.original_truncated"
            ),
        )


# ------------------------------------------------------------------------------ the state


def _by_name(read: Callable[[Any, str], _T]) -> Callable[[Any, str], dict[str, _T]]:
    """A reader of ``{name: value}`` objects whose values ``read`` reads."""

    def by_name(value: Any, path: str) -> dict[str, _T]:
        return {name: read(item, f"{path}.{name}") for name, item in _object(value, path).items()}

    return by_name


def _holds(value: Any, path: str) -> tuple[ParkedHold, ...]:
    return tuple(
        ParkedHold.from_json(entry, f"{path}[{i}]") for i, entry in enumerate(_entries(value, path))
    )


def _run_ids(value: Any, path: str) -> tuple[str, ...]:
    return tuple(_text(v, f"{path}[{i}]") for i, v in enumerate(_entries(value, path)))


def _hand_off(value: Any, path: str) -> HandOffMode:
    return cast(HandOffMode, _choice(value, get_args(HandOffMode), path))


def _stored(
    obj: Mapping[str, Any], key: str, read: Callable[[Any, str], _T]
) -> _T | None:
    """The value of known key ``key`` read with ``read``; ``None`` when absent or ``null``."""
    value = obj.get(key)
    return None if value is None else read(value, f"{_ROOT}.{key}")


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
        stored: dict[str, Any] = {}
        if self.admitted:
            stored[_ADMITTED] = True
        if self.rate_limit_charged:
            stored[_RATE_LIMIT_CHARGED] = True
        if self.ordered_ticket is not None:
            stored[_ORDERED_TICKET] = self.ordered_ticket.to_json()
        if self.step_ordered_tickets:
            stored[_STEP_ORDERED_TICKETS] = {
                step: ticket.to_json() for step, ticket in self.step_ordered_tickets.items()
            }
        if self.parked_holds:
            stored[_PARKED_HOLDS] = {
                scope: [hold.to_json() for hold in holds]
                for scope, holds in self.parked_holds.items()
            }
        if self.waiting is not None:
            stored[_WAITING] = self.waiting.to_json()
        if self.async_steps:
            stored[_ASYNC_STEPS] = {step: ref.to_json() for step, ref in self.async_steps.items()}
        if self.validate_inputs:
            stored[_VALIDATE_INPUTS] = True
        if self.argument_error is not None:
            stored[_ARGUMENT_ERROR] = self.argument_error
        if self.handed_off is not None:
            stored[_HANDED_OFF] = self.handed_off
        links = self.links
        if links.idempotency_key is not None:
            stored[_IDEMPOTENCY_KEY] = links.idempotency_key
        if links.retried_from is not None:
            stored[_RETRIED_FROM] = links.retried_from
        if links.retries:
            stored[_RETRIES] = list(links.retries)
        if self.quarantine is not None:
            stored[QUARANTINE_KEY] = self.quarantine.to_json()
        stored.update(self.extra)
        return stored

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
        obj = _object(value, _ROOT)
        return cls(
            admitted=_stored(obj, _ADMITTED, _flag) or False,
            rate_limit_charged=_stored(obj, _RATE_LIMIT_CHARGED, _flag) or False,
            ordered_ticket=_stored(obj, _ORDERED_TICKET, KeyedTicket.from_json),
            step_ordered_tickets=_stored(
                obj, _STEP_ORDERED_TICKETS, _by_name(KeyedTicket.from_json)
            ) or {},
            parked_holds=_stored(obj, _PARKED_HOLDS, _by_name(_holds)) or {},
            waiting=_stored(obj, _WAITING, Waiting.from_json),
            async_steps=_stored(obj, _ASYNC_STEPS, _by_name(AsyncStepRef.from_json)) or {},
            validate_inputs=_stored(obj, _VALIDATE_INPUTS, _flag) or False,
            argument_error=_stored(obj, _ARGUMENT_ERROR, _text),
            handed_off=_stored(obj, _HANDED_OFF, _hand_off),
            links=RunLinks(
                idempotency_key=_stored(obj, _IDEMPOTENCY_KEY, _text),
                retried_from=_stored(obj, _RETRIED_FROM, _text),
                retries=_stored(obj, _RETRIES, _run_ids) or (),
            ),
            quarantine=_stored(obj, QUARANTINE_KEY, Quarantine.from_json),
            extra={k: v for k, v in obj.items() if k not in STORED_KEYS},
        )

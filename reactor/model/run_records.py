"""Typed, frozen records of a run's bookkeeping: its undo-stack entries, the rollback in
progress, its execution-trace entries, its retry counters, the map references among its
``composed_contexts`` and, on a map element, its membership of the map (``map_metadata``)
(docs/protocol.md, "Contexts"; docs/concepts.md, "Stored runs").

Each record reads its stored shape with ``from_stored`` (validating: a malformed field raises
:class:`~reactor.errors.DeserializationError` naming it) and writes it back with
``to_stored``, which produces the very dict the engine has always stored: the same keys in
the same order, optional keys left out exactly when they always were. A stored entry's keys
this release does not know (a newer release may have written them) are kept in ``extra`` and
written back after the known ones, so a round trip loses nothing; keys an older writer left
out of an entry (``absent``) stay out. Records are immutable: the engine changes the run by
replacing them (``dataclasses.replace`` or the small methods below).

The records work on *decoded* documents (:func:`reactor.model.codec.decode_document`): the
rollback's ``failures`` are :class:`~reactor.model.results.RollbackFailure` values there. The
tools that read the raw stored JSON (the dashboard, ``reactor runs``) read the same records
with ``raw=True`` where a field holds a tagged value (:meth:`RollbackState.from_stored`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final

from reactor.errors import DeserializationError
from reactor.model.heartbeats import LastHeartbeat
from reactor.model.results import RollbackFailure
from reactor.model.secrets import seal_names

__all__ = [
    "MAP_REF",
    "RESULT_OF_STEP",
    "ForeignRef",
    "MapMembership",
    "MapRef",
    "Reference",
    "RetryCounters",
    "RollbackState",
    "TraceRecord",
    "UndoEntry",
]

#: The ``type`` of a map step's reference in ``composed_contexts`` (docs/protocol.md,
#: "Maps").
MAP_REF: Final = "map_ref"

#: The key an undo entry is stored with instead of ``"result"`` when its result is the very
#: object recorded as its step's result (each value is stored once: docs/protocol.md,
#: "Incremental checkpoints").
RESULT_OF_STEP: Final = "result_of_step"


# ------------------------------------------------------------------------------ reading


class _Fields:
    """Typed reads of one stored entry's keys, raising ``DeserializationError`` naming the
    entry (``where``) and the field; tracks which keys were read, so the rest is ``extra``."""

    __slots__ = ("_raw", "_read", "_where")

    def __init__(self, raw: Any, where: str) -> None:
        if not isinstance(raw, Mapping):
            raise DeserializationError(f"{where} must be an object, got {type(raw).__name__}")
        self._raw: Mapping[str, Any] = raw
        self._where = where
        self._read: set[str] = set()

    def has(self, key: str) -> bool:
        self._read.add(key)
        return key in self._raw

    def error(self, key: str, expected: str) -> DeserializationError:
        value = self._raw.get(key)
        return DeserializationError(
            f"{self._where} field {key!r} must be {expected}, got {type(value).__name__}"
        )

    def value(self, key: str, default: Any = None) -> Any:
        self._read.add(key)
        return self._raw.get(key, default)

    def text(self, key: str, *, required: bool = False, nullable: bool = False) -> str | None:
        self._read.add(key)
        if key not in self._raw:
            if required:
                raise DeserializationError(f"{self._where} has no {key!r} field")
            return None
        value = self._raw[key]
        if isinstance(value, str) or (value is None and nullable):
            return value
        raise self.error(key, "a string" + (" or null" if nullable else ""))

    def integer(self, key: str) -> int | None:
        value = self.value(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, "an integer")
        return value

    def number(self, key: str) -> float:
        self._read.add(key)
        if key not in self._raw:
            raise DeserializationError(f"{self._where} has no {key!r} field")
        value = self._raw[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(key, "a number")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.value(key, default)
        if not isinstance(value, bool):
            raise self.error(key, "a boolean")
        return value

    def mapping(self, key: str) -> dict[str, Any]:
        value = self.value(key, {})
        if not isinstance(value, Mapping):
            raise self.error(key, "an object")
        return dict(value)

    def names(self, key: str) -> tuple[str, ...] | None:
        value = self.value(key)
        if value is None:
            return None
        if not isinstance(value, list | tuple) or not all(isinstance(n, str) for n in value):
            raise self.error(key, "a list of strings")
        return tuple(value)

    def absent(self, keys: tuple[str, ...]) -> frozenset[str]:
        self._read.update(keys)
        return frozenset(k for k in keys if k not in self._raw)

    def extra(self) -> dict[str, Any]:
        return {k: v for k, v in self._raw.items() if k not in self._read}


def _put(stored: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        stored[key] = value


def _written(stored: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        stored.setdefault(key, value)
    return stored


# ------------------------------------------------------------------------------ undo entries


@dataclass(frozen=True, slots=True)
class UndoEntry:
    """One completed step on a run's undo stack (docs/concepts.md, "Rollback").

    Stored as ``{"step", "kind", "arguments", "result"}``, then ``"child_run_id"`` (an
    ``async_reactor`` step), ``"map_id"``/``"fan_out"``/``"count"``/``"elements"`` (a map
    step), ``"redacted"`` (its secret argument names, when it has any), in that order.

    Attributes:
        step: the step's name.
        kind: the step's kind (``step``, ``compose``, ``map``, ``async_reactor``, ...).
        arguments: the arguments the step ran with (the names in ``redacted`` sealed at rest).
        result: the step's value (handed to its ``undo``).
        child_run_id: an ``async_reactor`` step's child run id, else ``None``.
        map_id: a map step's map id, else ``None``.
        fan_out: ``True`` for a fan-out map, else ``None`` (not stored).
        count: a fan-out map's element count, else ``None``.
        elements: an inline map's completed elements as ``(index, run id)`` pairs, else
            ``None``.
        redacted: the secret argument names (docs/security.md, "What is encrypted"), or
            ``None`` (not stored) when there are none.
        extra: stored keys this release does not know, written back as they were.
        absent: of ``kind``, ``arguments`` and ``result``, the keys the stored entry did not
            have (an older writer): they stay out when it is written back.
    """

    step: str
    kind: str | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)
    result: Any = None
    child_run_id: str | None = None
    map_id: str | None = None
    fan_out: bool | None = None
    count: int | None = None
    elements: tuple[tuple[int, str], ...] | None = None
    redacted: tuple[str, ...] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    absent: frozenset[str] = frozenset()

    @classmethod
    def from_stored(
        cls, raw: Any, results: Mapping[str, Any] | None = None, where: str = "undo entry"
    ) -> UndoEntry:
        """Read a stored undo entry.

        Args:
            raw: the stored dict (decoded, or raw JSON).
            results: the run's ``intermediate_results``: an entry stored with
                ``"result_of_step": true`` gets its step's result back from them (``None``:
                the marker is kept in ``extra``, as read).
            where: names the entry in errors (e.g. ``"context field 'undo_stack'[2]"``).

        Returns:
            The entry.

        Raises:
            DeserializationError: ``raw`` is no object, ``step`` is missing or no string,
                ``arguments`` no object, ``elements`` no list of ``[index, run id]`` pairs,
                ``redacted`` no list of strings, or another known field of the wrong type.
        """
        reader = _Fields(raw, where)
        step = reader.text("step", required=True)
        assert step is not None
        absent = reader.absent(("kind", "arguments", "result"))
        result = reader.value("result")
        if results is not None and reader.value(RESULT_OF_STEP) is True:
            result, absent = results.get(step), absent - {"result"}
        kind = reader.value("kind")
        if kind is not None and not isinstance(kind, str):
            raise reader.error("kind", "a string")
        return cls(
            step=step,
            kind=kind,
            arguments=reader.mapping("arguments"),
            result=result,
            child_run_id=reader.text("child_run_id"),
            map_id=reader.text("map_id"),
            fan_out=_optional_flag(reader, "fan_out"),
            count=reader.integer("count"),
            elements=_pairs(reader),
            redacted=reader.names("redacted"),
            extra=reader.extra(),
            absent=absent,
        )

    def to_stored(
        self,
        results: Mapping[str, Any] | None = None,
        seal: Callable[[Any], Any] | None = None,
    ) -> dict[str, Any]:
        """The entry as the engine stores it.

        Args:
            results: the run's ``intermediate_results``: when ``result`` is the very object
                recorded as the step's result, it is written as ``"result_of_step": true``
                instead (last key). ``None``: ``result`` is written as it is.
            seal: ``value -> sealed value``, applied to the arguments named in ``redacted``
                (docs/security.md, "What is encrypted"); ``None`` leaves them in clear.

        Returns:
            A new dict: ``step``, ``kind``, ``arguments``, ``result``, then the optional keys
            that are set, then ``extra``.
        """
        stored: dict[str, Any] = {"step": self.step}
        if "kind" not in self.absent:
            stored["kind"] = self.kind
        if "arguments" not in self.absent:
            stored["arguments"] = self.stored_arguments(seal)
        of_step = (
            results is not None and self.step in results and results[self.step] is self.result
            and "result" not in self.absent
        )
        if "result" not in self.absent and not of_step:
            stored["result"] = self.result
        _put(stored, "child_run_id", self.child_run_id)
        _put(stored, "map_id", self.map_id)
        _put(stored, "fan_out", self.fan_out)
        _put(stored, "count", self.count)
        if self.elements is not None:
            stored["elements"] = [[index, run_id] for index, run_id in self.elements]
        if self.redacted is not None:
            stored["redacted"] = list(self.redacted)
        _written(stored, self.extra)
        if of_step:
            stored[RESULT_OF_STEP] = True
        return stored

    def stored_arguments(self, seal: Callable[[Any], Any] | None) -> Any:
        """``arguments`` with the names in ``redacted`` sealed (``seal`` given), as stored."""
        if seal is None or not self.redacted:
            return self.arguments
        return seal_names(self.arguments, self.redacted, seal)


def _optional_flag(reader: _Fields, key: str) -> bool | None:
    value = reader.value(key)
    if value is not None and not isinstance(value, bool):
        raise reader.error(key, "a boolean")
    return value


def _pairs(reader: _Fields) -> tuple[tuple[int, str], ...] | None:
    value = reader.value("elements")
    if value is None:
        return None
    if not isinstance(value, list | tuple) or not all(
        isinstance(pair, list | tuple) and len(pair) == 2
        and isinstance(pair[0], int) and not isinstance(pair[0], bool)
        and isinstance(pair[1], str)
        for pair in value
    ):
        raise reader.error("elements", "a list of [index, run id] pairs")
    return tuple((pair[0], pair[1]) for pair in value)


# ------------------------------------------------------------------------------ rollback


@dataclass(frozen=True, slots=True)
class RollbackState:
    """The rollback in progress on a run (or cut off by an interruption): kept in the run, so
    it survives a crash (docs/concepts.md, "Rollback").

    Stored as ``{"step", "kind", "arguments", "compensate_pending", "compensate_failed",
    "failures"}``, then ``"redacted"`` and ``"interruption"`` when set.

    Attributes:
        step: the step whose failure started the rollback, or ``None`` (an undo or cancel).
        kind: that step's kind, or ``None``.
        arguments: that step's arguments (the names in ``redacted`` sealed at rest).
        compensate_pending: the step's compensate has not run yet.
        compensate_failed: the step's compensate ran and failed.
        failures: every undo/compensate that did not complete so far.
        redacted: the secret argument names, or ``None`` (not stored) when there are none.
        interruption: the class name of the interruption that cut the run off (its
            compensate receives a ``Failure`` naming it), or ``None`` (not stored).
        extra: stored keys this release does not know, written back as they were.
        absent: of ``kind``, ``compensate_pending``, ``compensate_failed`` and ``failures``,
            the keys the stored record did not have (an older writer).
    """

    step: str | None = None
    kind: str | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)
    compensate_pending: bool = False
    compensate_failed: bool = False
    failures: tuple[RollbackFailure, ...] = ()
    redacted: tuple[str, ...] | None = None
    interruption: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    absent: frozenset[str] = frozenset()

    @classmethod
    def from_stored(
        cls, raw: Any, where: str = "rollback record", *, raw_failures: bool = False
    ) -> RollbackState:
        """Read a stored rollback record.

        Args:
            raw: the stored dict.
            where: names the record in errors.
            raw_failures: ``raw`` is raw JSON (not decoded): ``failures`` holds the tagged
                form of each failure, read as such (``{"__t": "reactor.RollbackFailure",
                "v": {...}}``); a failure that does not read is left out.

        Returns:
            The record.

        Raises:
            DeserializationError: ``raw`` is no object, or ``step``/``kind`` is neither a
                string nor null, ``arguments`` no object, a flag no boolean, ``failures`` no
                list of ``RollbackFailure``, ``redacted`` no list of strings,
                ``interruption`` no string.
        """
        reader = _Fields(raw, where)
        absent = reader.absent(("kind", "compensate_pending", "compensate_failed", "failures"))
        failures = reader.value("failures", [])
        if not isinstance(failures, list | tuple):
            raise reader.error("failures", "a list")
        if raw_failures:
            failures = [f for f in map(_raw_failure, failures) if f is not None]
        elif not all(isinstance(f, RollbackFailure) for f in failures):
            raise reader.error("failures", "a list of RollbackFailure")
        return cls(
            step=reader.text("step", nullable=True),
            kind=reader.text("kind", nullable=True),
            arguments=reader.mapping("arguments"),
            compensate_pending=reader.flag("compensate_pending", False),
            compensate_failed=reader.flag("compensate_failed", False),
            failures=tuple(failures),
            redacted=reader.names("redacted"),
            interruption=reader.text("interruption", nullable=True),
            extra=reader.extra(),
            absent=absent,
        )

    def to_stored(self, seal: Callable[[Any], Any] | None = None) -> dict[str, Any]:
        """The record as the engine stores it (``seal``: as in :meth:`UndoEntry.to_stored`).

        Returns:
            A new dict, keys in the stored order, ``extra`` last.
        """
        arguments: Any = self.arguments
        if seal is not None and self.redacted:
            arguments = seal_names(self.arguments, self.redacted, seal)
        stored: dict[str, Any] = {"step": self.step}
        for key, value in (
            ("kind", self.kind), ("arguments", arguments),
            ("compensate_pending", self.compensate_pending),
            ("compensate_failed", self.compensate_failed), ("failures", list(self.failures)),
        ):
            if key not in self.absent:
                stored[key] = value
        if self.redacted is not None:
            stored["redacted"] = list(self.redacted)
        _put(stored, "interruption", self.interruption)
        return _written(stored, self.extra)

    def with_failures(self, failures: tuple[RollbackFailure, ...] | list[RollbackFailure]
                      ) -> RollbackState:
        """A copy with ``failures`` appended to :attr:`failures`."""
        return replace(self, failures=(*self.failures, *failures))


def _raw_failure(value: Any) -> RollbackFailure | None:
    """A rollback failure from its tagged raw JSON form, or ``None`` when it does not read."""
    body = value.get("v") if isinstance(value, Mapping) else None
    if not isinstance(body, Mapping):
        return None
    step, kind, reason, message = (body.get(k) for k in ("step", "kind", "reason", "message"))
    map_step, index = body.get("map_step"), body.get("element_index")
    if not all(isinstance(x, str) for x in (step, kind, reason, message)) or kind not in (
        "undo", "compensate"
    ):
        return None
    return RollbackFailure(
        str(step), "undo" if kind == "undo" else "compensate", str(reason), str(message),
        map_step=map_step if isinstance(map_step, str) else None,
        element_index=index if isinstance(index, int) and not isinstance(index, bool) else None,
    )


# ------------------------------------------------------------------------------ trace


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One stored execution-trace entry (docs/concepts.md, "Stored runs"); never holds step
    arguments.

    Stored as ``{"type", "step", "at"}`` followed by the entry's details in the order they
    were written (``attempt``, ``detail``, and any other).

    Attributes:
        type: ``run``, ``failed``, ``retry``, ``compensate``, ``compensate_failure``,
            ``undo``, ``undo_failure``, ``halt``, ``skipped``, ``paused``, ``resumed``,
            ``cancelled``, ``dispatched``, ``contention_park``...
        step: the step name, or ``None`` (a run-level entry).
        at: epoch seconds (storage clock).
        extra: the keys after ``at``, in stored order; :attr:`attempt`, :attr:`detail` and,
            on a ``hold_lost`` entry, :attr:`primitive`, :attr:`key` and :attr:`lost_at` read
            the ones the engine writes.
    """

    type: str
    step: str | None
    at: float
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, type_: str, step: str | None, at: float, **details: Any) -> TraceRecord:
        """A new entry; details whose value is ``None`` are left out (keyword order kept)."""
        return cls(type_, step, at, {k: v for k, v in details.items() if v is not None})

    @property
    def attempt(self) -> int | None:
        """The attempt number of a ``run``/``failed``/``retry`` entry, else ``None``."""
        value = self.extra.get("attempt")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def detail(self) -> str | None:
        """The entry's short message (failure message, retry delay, halt reason...), or
        ``None``."""
        value = self.extra.get("detail")
        return value if isinstance(value, str) else None

    @property
    def started(self) -> float | None:
        """A concurrent branch's ``run`` entry: epoch seconds when the step started, else
        ``None`` (docs/concepts.md, "Concurrency")."""
        value = self.extra.get("started")
        return float(value) if isinstance(value, int | float) and not isinstance(
            value, bool) else None

    @property
    def primitive(self) -> str | None:
        """A ``hold_lost`` entry's primitive (``lock``, ``semaphore``...), else ``None``."""
        value = self.extra.get("primitive")
        return value if isinstance(value, str) else None

    @property
    def key(self) -> str | None:
        """A ``hold_lost`` entry's coordination key, else ``None``."""
        value = self.extra.get("key")
        return value if isinstance(value, str) else None

    @property
    def lost_at(self) -> float | None:
        """A ``hold_lost`` entry's epoch seconds the hold was found lost, else ``None``."""
        value = self.extra.get("lost_at")
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None

    @property
    def background(self) -> bool:
        """Whether this entry stands for an ``async_step`` unit's run (views merge them in;
        never stored)."""
        return self.extra.get("background") is True

    @classmethod
    def from_stored(cls, raw: Any, where: str = "trace entry") -> TraceRecord:
        """Read a stored trace entry.

        Raises:
            DeserializationError: ``raw`` is no object, ``type`` is missing or no string,
                ``step`` neither a string nor null, ``at`` missing or no number,
                ``attempt`` no integer, ``detail``/``primitive``/``key`` no string,
                ``lost_at`` no number.
        """
        reader = _Fields(raw, where)
        type_ = reader.text("type", required=True)
        assert type_ is not None
        step = reader.text("step", nullable=True)
        at = reader.number("at")
        reader.integer("attempt")
        for name in ("detail", "primitive", "key"):
            reader.text(name, nullable=True)
        if reader.value("lost_at") is not None:
            reader.number("lost_at")
        extra = {k: v for k, v in raw.items() if k not in ("type", "step", "at")}
        return cls(type_, step, at, extra)

    def to_stored(self) -> dict[str, Any]:
        """The entry as stored: a new dict ``{"type", "step", "at", **extra}``."""
        return {"type": self.type, "step": self.step, "at": self.at, **self.extra}


# ------------------------------------------------------------------------------ retries


@dataclass(frozen=True, slots=True)
class RetryCounters:
    """A run's retry bookkeeping, stored as ``retry_context``: ``{}`` until a step first
    retries, then ``{"attempts": {step: attempts used}}`` (docs/concepts.md, "Retries"), and
    ``"spent": {step: seconds}`` while a step with a ``total`` time limit waits in a queue for
    its next attempt (docs/concepts.md, "Time limits").

    Attributes:
        attempts: step name -> the attempts it used so far, or ``None`` (not stored) before
            any was counted.
        spent: step name -> the seconds of its ``total`` limit used by the attempts and
            retry waits before the retry was handed to the queue; ``None`` (not stored) when
            no step's is kept.
        heartbeats: step name -> its last heartbeat when the retry was handed to the queue
            (docs/concepts.md, "Heartbeats"), stored as ``"heartbeats": {step: {"details",
            "at", "attempt"}}``; ``None`` (not stored) when no step's is kept.
        extra: stored keys this release does not know, written back as they were.
    """

    attempts: Mapping[str, int] | None = None
    spent: Mapping[str, float] | None = None
    heartbeats: Mapping[str, LastHeartbeat] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def heartbeat_of(self, step: str) -> LastHeartbeat | None:
        """The last heartbeat ``step`` made before its retry was handed to the queue."""
        return None if self.heartbeats is None else self.heartbeats.get(step)

    def with_heartbeat(self, step: str, last: LastHeartbeat | None) -> RetryCounters:
        """A copy keeping ``last`` as ``step``'s last heartbeat (``None``: forgotten; the
        ``heartbeats`` object is dropped when it names no step)."""
        kept = dict(self.heartbeats or {})
        if last is None:
            kept.pop(step, None)
        else:
            kept[step] = last
        return replace(self, heartbeats=kept or None)

    def spent_of(self, step: str) -> float:
        """The seconds of ``step``'s ``total`` limit used in earlier executions (0 when none
        were kept)."""
        return 0.0 if self.spent is None else self.spent.get(step, 0.0)

    def with_spent(self, step: str, seconds: float | None) -> RetryCounters:
        """A copy keeping ``seconds`` as the time ``step`` used (``None``: forgotten; the
        ``spent`` object is dropped when it names no step, so a run that never handed a
        limited retry to the queue stores what it always did)."""
        spent = dict(self.spent or {})
        if seconds is None:
            spent.pop(step, None)
        else:
            spent[step] = float(seconds)
        return replace(self, spent=spent or None)

    def attempts_of(self, step: str) -> int | None:
        """The attempts ``step`` used so far, or ``None`` when none was counted."""
        return None if self.attempts is None else self.attempts.get(step)

    def counted(self, step: str, attempts: int | None) -> RetryCounters:
        """A copy where ``step`` used ``attempts`` (``None``: its count is removed; the
        ``attempts`` object is stored from now on either way)."""
        counts = dict(self.attempts or {})
        if attempts is None:
            counts.pop(step, None)
        else:
            counts[step] = attempts
        return replace(self, attempts=counts)

    @classmethod
    def from_stored(cls, raw: Any, where: str = "context field 'retry_context'") -> RetryCounters:
        """Read a stored ``retry_context``.

        Raises:
            DeserializationError: ``raw`` is no object, or ``attempts`` no object of
                step name -> integer.
        """
        reader = _Fields(raw, where)
        attempts = reader.value("attempts")
        if attempts is not None and not (
            isinstance(attempts, Mapping) and all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                for k, v in attempts.items()
            )
        ):
            raise reader.error("attempts", "an object of step name -> integer")
        spent = reader.value("spent")
        if spent is not None and not (
            isinstance(spent, Mapping) and all(
                isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool)
                and math.isfinite(v) and v >= 0
                for k, v in spent.items()
            )
        ):
            raise reader.error("spent", "an object of step name -> seconds (a number >= 0)")
        beats = reader.value("heartbeats")
        if beats is not None and not (
            isinstance(beats, Mapping) and all(isinstance(k, str) for k in beats)
        ):
            raise reader.error("heartbeats", "an object of step name -> heartbeat")
        return cls(
            None if attempts is None else dict(attempts),
            None if spent is None else dict(spent),
            None if beats is None else {
                step: LastHeartbeat.from_stored(raw, f"{where} field 'heartbeats.{step}'")
                for step, raw in beats.items()
            },
            reader.extra(),
        )

    def to_stored(self) -> dict[str, Any]:
        """The stored ``retry_context``: a new dict."""
        stored: dict[str, Any] = {}
        if self.attempts is not None:
            stored["attempts"] = dict(self.attempts)
        if self.spent:
            stored["spent"] = dict(self.spent)
        if self.heartbeats:
            stored["heartbeats"] = {
                step: last.to_stored() for step, last in self.heartbeats.items()
            }
        return _written(stored, self.extra)


# ------------------------------------------------------------------------------ map references


@dataclass(frozen=True, slots=True)
class MapRef:
    """A map step's entry in ``composed_contexts`` (docs/protocol.md, "Maps"; docs/fan_out.md).

    Stored as ``{"type": "map_ref", "map_id", "elements"}`` for an inline map, and as
    ``{"type": "map_ref", "map_id", "fan_out": true, "count", "elements": {}}`` (plus
    ``"started"`` once the map settled) for a fan-out map.

    Attributes:
        map_id: the map's id.
        elements: an inline map's started elements, index -> element run id (stored with
            the index as text).
        fan_out: ``True`` for a fan-out map, else ``None`` (not stored).
        count: a fan-out map's element count, else ``None``.
        started: set once a fan-out map settled: the elements it started (a late rollback
            names each of them), else ``None``.
        extra: stored keys this release does not know, written back as they were.
    """

    map_id: str
    elements: Mapping[int, str] = field(default_factory=dict)
    fan_out: bool | None = None
    count: int | None = None
    started: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_fan_out(self) -> bool:
        """Whether this is a fan-out map's reference."""
        return bool(self.fan_out)

    def with_element(self, index: int, run_id: str) -> MapRef:
        """A copy naming ``run_id`` as element ``index``."""
        return replace(self, elements={**self.elements, index: run_id})

    @staticmethod
    def is_stored_ref(raw: Any) -> bool:
        """Whether ``raw`` (a stored ``composed_contexts`` value) is a map reference."""
        return isinstance(raw, Mapping) and raw.get("type") == MAP_REF

    @classmethod
    def from_stored(cls, raw: Any, where: str = "map_ref") -> MapRef:
        """Read a stored map reference.

        Raises:
            DeserializationError: ``raw`` is no object of ``type`` ``"map_ref"``,
                ``map_id`` no string, ``elements`` no object of index text -> run id,
                ``count``/``started`` no integer, ``fan_out`` no boolean.
        """
        reader = _Fields(raw, where)
        if reader.value("type") != MAP_REF:
            raise reader.error("type", "'map_ref'")
        map_id = reader.text("map_id", required=True)
        assert map_id is not None
        elements = reader.value("elements", {})
        if not isinstance(elements, Mapping) or not all(
            isinstance(k, str) and k.isdigit() and isinstance(v, str)
            for k, v in elements.items()
        ):
            raise reader.error("elements", "an object of index -> run id")
        return cls(
            map_id=map_id,
            elements={int(k): v for k, v in elements.items()},
            fan_out=_optional_flag(reader, "fan_out"),
            count=reader.integer("count"),
            started=reader.integer("started"),
            extra=reader.extra(),
        )

    def to_stored(self) -> dict[str, Any]:
        """The stored reference: a new dict, keys in the stored order, ``extra`` last."""
        stored: dict[str, Any] = {"type": MAP_REF, "map_id": self.map_id}
        _put(stored, "fan_out", self.fan_out)
        _put(stored, "count", self.count)
        stored["elements"] = {str(k): v for k, v in self.elements.items()}
        _put(stored, "started", self.started)
        return _written(stored, self.extra)


@dataclass(frozen=True, slots=True)
class ForeignRef:
    """A ``composed_contexts`` value of a kind this release does not read (a newer release
    may have written it): kept as stored, written back unchanged.

    Attributes:
        raw: the stored value.
    """

    raw: Any

    def to_stored(self) -> Any:
        """The stored value, unchanged."""
        return self.raw


#: What a ``composed_contexts`` entry other than an embedded child context is.
Reference = MapRef | ForeignRef


# ------------------------------------------------------------------------------ map membership


@dataclass(frozen=True, slots=True)
class MapMembership:
    """What makes a run a map element: the map it belongs to and its place in it, stored as
    the element context's ``map_metadata`` (docs/concepts.md, "Inline map";
    docs/fan_out.md).

    Stored as ``{"map_step", "map_id", "index", "parent_reactor"}``, in that order (the only
    shape the engine has written, inline and fan-out alike); a run that is no map element
    stores ``null``.

    Attributes:
        map_step: the parent's map step that started the element.
        map_id: the map's id (the parent's :class:`MapRef` ``map_id``).
        index: the element's 0-based index in the map's source.
        parent_reactor: the registered name of the reactor declaring the map step.
        extra: stored keys this release does not know, written back as they were.
    """

    map_step: str
    map_id: str
    index: int
    parent_reactor: str
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_stored(cls, raw: Any, where: str = "map_metadata") -> MapMembership:
        """Read a stored ``map_metadata``.

        Args:
            raw: the stored dict (decoded, or raw JSON: it holds no tagged value).
            where: names the record in errors (e.g. ``"context field 'map_metadata'"``).

        Returns:
            The membership.

        Raises:
            DeserializationError: ``raw`` is no object, ``map_step``, ``map_id`` or
                ``parent_reactor`` is missing or no string, ``index`` missing or no
                non-negative integer.
        """
        reader = _Fields(raw, where)
        map_step = reader.text("map_step", required=True)
        map_id = reader.text("map_id", required=True)
        if not reader.has("index"):
            raise DeserializationError(f"{where} has no 'index' field")
        index = reader.integer("index")
        if index is None or index < 0:
            raise reader.error("index", "a non-negative integer")
        parent_reactor = reader.text("parent_reactor", required=True)
        assert map_step is not None and map_id is not None and parent_reactor is not None
        return cls(map_step, map_id, index, parent_reactor, reader.extra())

    def to_stored(self) -> dict[str, Any]:
        """The stored ``map_metadata``: a new dict ``{"map_step", "map_id", "index",
        "parent_reactor"}``, ``extra`` last."""
        stored: dict[str, Any] = {
            "map_step": self.map_step, "map_id": self.map_id, "index": self.index,
            "parent_reactor": self.parent_reactor,
        }
        return _written(stored, self.extra)

    @staticmethod
    def index_in(raw: Any) -> int | None:
        """The element index a ``map_metadata`` mapping names, however partial (a
        ``StepContext`` built by hand for a unit test may hold only ``{"index": 3}``).

        Args:
            raw: a ``map_metadata`` mapping, or ``None``.

        Returns:
            Its ``index`` when that is a non-negative integer, else ``None``.
        """
        value = raw.get("index") if isinstance(raw, Mapping) else None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return None
        return value

    def as_mapping(self) -> Mapping[str, Any]:
        """The stored ``map_metadata`` as a read-only mapping: what the public views
        (``RunView.map_metadata``, ``StepContext.map_metadata``) show a map element's users
        (docs/concepts.md, "Inline map")."""
        return MappingProxyType(self.to_stored())

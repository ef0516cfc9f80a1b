"""A schedule's stored document: its definition (stored schedules only) and the schedulers'
shared state, read and written by compare-and-set (docs/protocol.md, "Schedules").

The document is JSON (``ScheduleRecord.document``)::

    {"v": 1,
     "definition": {"reactor": ..., "cron": ..., ...},   # reactor schedules add only
     "paused": false, "paused_at": null,
     "cursor": 1893456000.0,          # every tick at or before it is settled
     "pending": {"tick": ..., "action": "run" | "skip", "reason": ...,
                 "skipped_from": ..., "skipped_to": ..., "skipped_reason": ...} | null,
     "last": {"tick": ..., "action": ..., "reason": ..., "run_id": ..., "at": ...} | null,
     "last_run_id": "<run id>" | null,
     "created_at": ..., "updated_at": ...}

Times are epoch seconds (UTC). A key this version does not know is kept and written back; a
document that is not JSON, or a known key of the wrong type, raises
:class:`~reactor.errors.StorageError` naming the schedule.

:func:`schedule_store` is the storage's :class:`~reactor.ports.ScheduleStore`, or a
process-memory one for a storage without :class:`~reactor.ports.capabilities.KeepsSchedules`.
"""

from __future__ import annotations

import json
import math
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

from reactor.errors import StorageError
from reactor.generic.schedules import DocumentScheduleStore
from reactor.memory.documents import MemoryDocumentStore
from reactor.ports.capabilities import KeepsSchedules, declares
from reactor.ports.storage import ScheduleStore, Storage

__all__ = [
    "STATE_VERSION",
    "Decision",
    "LastTick",
    "ScheduleState",
    "keeps_schedules",
    "schedule_store",
]

#: The ``v`` this version writes.
STATE_VERSION = 1

Action = Literal["run", "skip"]


def _number(value: object, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{what} must be a number of epoch seconds, got {value!r}")
    return float(value)


def _text(value: object, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{what} must be text, got {value!r}")


def _action(value: object, what: str) -> Action:
    if value == "run":
        return "run"
    if value == "skip":
        return "skip"
    raise ValueError(f"{what} must be 'run' or 'skip', got {value!r}")


@dataclass(frozen=True, slots=True)
class Decision:
    """A tick decided but not yet carried out: every tick after the cursor up to ``tick`` is
    settled by it.

    Attributes:
        tick: the tick decided (epoch seconds).
        action: ``"run"`` (start its run) or ``"skip"``.
        reason: why it is skipped (``None`` for a run).
        skipped_from, skipped_to: the first and last of the earlier ticks it settles as
            skipped (``None`` when there are none).
        skipped_reason: why those are skipped (``"missed"``, ``"catch-up one"``,
            ``"catch-up limit"``).
    """

    tick: float
    action: Action
    reason: str | None = None
    skipped_from: float | None = None
    skipped_to: float | None = None
    skipped_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored shape."""
        return {
            "tick": self.tick, "action": self.action, "reason": self.reason,
            "skipped_from": self.skipped_from, "skipped_to": self.skipped_to,
            "skipped_reason": self.skipped_reason,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Decision:
        """Read the stored shape.

        Raises:
            ValueError: a field of the wrong type.
        """
        tick = _number(raw.get("tick"), "pending.tick")
        if tick is None:
            raise ValueError("pending.tick is missing")
        return cls(
            tick=tick,
            action=_action(raw.get("action"), "pending.action"),
            reason=_text(raw.get("reason"), "pending.reason"),
            skipped_from=_number(raw.get("skipped_from"), "pending.skipped_from"),
            skipped_to=_number(raw.get("skipped_to"), "pending.skipped_to"),
            skipped_reason=_text(raw.get("skipped_reason"), "pending.skipped_reason"),
        )


@dataclass(frozen=True, slots=True)
class LastTick:
    """The last tick settled.

    Attributes:
        tick: the tick (epoch seconds).
        action: ``"run"`` or ``"skip"``.
        reason: why it was skipped (``None`` for a run).
        run_id: the run started for it (``None`` when skipped).
        at: when it was settled (epoch seconds, the scheduler's clock).
    """

    tick: float
    action: Action
    reason: str | None
    run_id: str | None
    at: float

    def to_json(self) -> dict[str, Any]:
        """The stored shape."""
        return {"tick": self.tick, "action": self.action, "reason": self.reason,
                "run_id": self.run_id, "at": self.at}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> LastTick:
        """Read the stored shape.

        Raises:
            ValueError: a field of the wrong type.
        """
        tick = _number(raw.get("tick"), "last.tick")
        at = _number(raw.get("at"), "last.at")
        if tick is None or at is None:
            raise ValueError("last.tick and last.at are required")
        return cls(tick=tick, action=_action(raw.get("action"), "last.action"),
                   reason=_text(raw.get("reason"), "last.reason"),
                   run_id=_text(raw.get("run_id"), "last.run_id"), at=at)


@dataclass(frozen=True, slots=True)
class ScheduleState:
    """A schedule's stored document, typed (see the module docstring).

    Attributes:
        definition: the stored definition (``reactor schedules add``); ``None`` for a schedule
            declared in code, whose document holds its state only.
        paused: no tick is decided while set.
        paused_at: when it was paused (epoch seconds), or ``None``.
        cursor: every tick at or before it is settled (epoch seconds).
        pending: the tick decided and not yet carried out, or ``None``.
        last: the last tick settled, or ``None``.
        last_run_id: the last run started by the schedule (the overlap check reads it).
        created_at, updated_at: epoch seconds.
        extra: keys this version does not know, written back unchanged.
    """

    definition: Mapping[str, Any] | None
    cursor: float
    created_at: float
    updated_at: float
    paused: bool = False
    paused_at: float | None = None
    pending: Decision | None = None
    last: LastTick | None = None
    last_run_id: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def new(cls, now: float, definition: Mapping[str, Any] | None = None) -> ScheduleState:
        """A schedule first seen (or added) at ``now``: its ticks start after ``now``."""
        return cls(definition=definition, cursor=now, created_at=now, updated_at=now)

    def to_document(self) -> str:
        """The stored JSON text."""
        doc: dict[str, Any] = dict(self.extra)
        doc.update({
            "v": STATE_VERSION,
            "paused": self.paused,
            "paused_at": self.paused_at,
            "cursor": self.cursor,
            "pending": None if self.pending is None else self.pending.to_json(),
            "last": None if self.last is None else self.last.to_json(),
            "last_run_id": self.last_run_id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        })
        if self.definition is not None:
            doc["definition"] = dict(self.definition)
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_document(cls, name: str, text: str) -> ScheduleState:
        """Read a stored document.

        Raises:
            StorageError: not a JSON object, or a known key of the wrong type (the message
                names the schedule and the key).
        """
        try:
            raw = json.loads(text)
            if not isinstance(raw, dict):
                raise ValueError("the document is not a JSON object")
            definition = raw.pop("definition", None)
            if definition is not None and not isinstance(definition, dict):
                raise ValueError("definition must be an object")
            paused = raw.pop("paused", False)
            if not isinstance(paused, bool):
                raise ValueError(f"paused must be true or false, got {paused!r}")
            cursor = _number(raw.pop("cursor", None), "cursor")
            created = _number(raw.pop("created_at", None), "created_at")
            updated = _number(raw.pop("updated_at", None), "updated_at")
            if cursor is None or created is None:
                raise ValueError("cursor and created_at are required")
            pending = raw.pop("pending", None)
            last = raw.pop("last", None)
            if pending is not None and not isinstance(pending, dict):
                raise ValueError("pending must be an object or null")
            if last is not None and not isinstance(last, dict):
                raise ValueError("last must be an object or null")
            state = cls(
                definition=definition,
                cursor=cursor,
                created_at=created,
                updated_at=created if updated is None else updated,
                paused=paused,
                paused_at=_number(raw.pop("paused_at", None), "paused_at"),
                pending=None if pending is None else Decision.from_json(pending),
                last=None if last is None else LastTick.from_json(last),
                last_run_id=_text(raw.pop("last_run_id", None), "last_run_id"),
            )
            raw.pop("v", None)
            return replace(state, extra=raw)
        except ValueError as exc:  # JSONDecodeError included
            raise StorageError(f"stored schedule {name!r} is malformed: {exc}") from exc


class _ProcessSchedules:
    """Process-memory schedule stores for storages without ``schedules`` (one per storage)."""

    _by_storage: weakref.WeakKeyDictionary[Any, ScheduleStore] = weakref.WeakKeyDictionary()
    _unreferenceable: dict[int, ScheduleStore] = {}

    @classmethod
    def of(cls, storage: Storage) -> ScheduleStore:
        try:
            found = cls._by_storage.get(storage)
            if found is None:
                found = DocumentScheduleStore(MemoryDocumentStore())
                cls._by_storage[storage] = found
            return found
        except TypeError:  # not weakly referenceable
            return cls._unreferenceable.setdefault(
                id(storage), DocumentScheduleStore(MemoryDocumentStore())
            )


def keeps_schedules(storage: Storage) -> bool:
    """Whether ``storage`` keeps schedules (declares
    :class:`~reactor.ports.capabilities.KeepsSchedules` with a store set)."""
    return declares(storage, KeepsSchedules) and getattr(storage, "schedules", None) is not None


def schedule_store(storage: Storage) -> ScheduleStore:
    """The storage's schedule store, else this process's memory (docs/protocol.md,
    "Schedules": a scheduler then keeps its code schedules' state to itself)."""
    if keeps_schedules(storage):
        return cast(KeepsSchedules, storage).schedules
    return _ProcessSchedules.of(storage)

"""Typed records exchanged between the engine and a storage adapter.

Every record is a frozen, slotted dataclass: adapters construct them from what they stored and
the engine never sees backend types. Opaque engine payloads (contexts, map result values,
rollback failures, interrupt payloads) travel as JSON text produced by
:mod:`reactor.model.codec`; an adapter stores the text verbatim and never parses it.

Times are epoch seconds (``float``) on the storage clock (:meth:`Storage.now`); durations are
seconds. A TTL of ``None`` means "no expiry".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

__all__ = [
    "FAILED_ROLLBACK_OUTCOMES",
    "ContextDelta",
    "ContextRecord",
    "ElementStart",
    "Fence",
    "LockClaim",
    "LockInfo",
    "MapMetadata",
    "MapRollbackMetadata",
    "OrderedGate",
    "OrderedGateState",
    "OrderedLockState",
    "OrderedTicket",
    "PeriodMarker",
    "RateDecision",
    "RateWindow",
    "RollbackOutcome",
    "RollbackOutcomeKind",
    "RollbackSummary",
    "RunPage",
    "RunSummary",
    "ScanPage",
    "ScheduleRecord",
    "SemaphoreState",
    "StepResultRecord",
    "StepResultStatus",
]


@dataclass(frozen=True, slots=True)
class ContextRecord:
    """One stored run context (a top-level run, an ``async_reactor`` child or a map element).

    Attributes:
        context_id: the run's id (a UUID string); unique across reactors.
        reactor: the registered reactor name that owns the context.
        status: a :class:`reactor.model.status.RunStatus` value (projected for scans).
        document: the JSON text produced by the engine's codec; stored verbatim.
        created_at: epoch seconds when the run was created.
        updated_at: epoch seconds of this write.
        parent_context_id: the parent run for map elements and ``async_reactor`` children;
            ``None`` for a top-level run.
        root_context_id: the root of the execution tree (``None`` for a root).
        dispatched_child: ``True`` for an ``async_reactor`` child, which the run sweeper lists
            like a root although it has a parent (docs/protocol.md#contexts).
        base: the id of the full save ``document`` came from, which :class:`ContextDelta`
            appends name; ``""`` for a record written before incremental checkpoints (no
            append applies to it).
        segments: the encoded deltas appended after ``document``, oldest first
            (docs/protocol.md, "Incremental checkpoints"); ``()`` when ``document`` is the whole
            run. Readers fold them with :func:`reactor.model.checkpoints.stored_document`.
    """

    context_id: str
    reactor: str
    status: str
    document: str
    created_at: float
    updated_at: float
    parent_context_id: str | None = None
    root_context_id: str | None = None
    dispatched_child: bool = False
    base: str = ""
    segments: tuple[str, ...] = ()

    @property
    def is_sweepable_root(self) -> bool:
        """Whether the run sweeper treats this record as its own unit (root or dispatched child)."""
        return self.parent_context_id is None or self.dispatched_child

    @property
    def stored_bytes(self) -> int:
        """The UTF-8 size of ``document`` and every segment, in bytes (what the size limit of
        a run counts: docs/protocol.md, "Incremental checkpoints")."""
        return sum(len(text.encode("utf-8")) for text in (self.document, *self.segments))


@dataclass(frozen=True, slots=True)
class ContextDelta:
    """One incremental checkpoint of a run: a segment appended after a stored context's base
    (``AppendsContexts.append``; docs/protocol.md, "Incremental checkpoints").

    Attributes:
        context_id: the run's id.
        base: the :attr:`ContextRecord.base` the writer's state extends.
        position: the 1-based place of this segment among the base's segments; the store
            appends only when exactly ``position - 1`` segments follow ``base``.
        status: the run's status after this checkpoint (projected for scans and pages).
        updated_at: epoch seconds of this write.
        segment: the delta's JSON text (produced by the engine's codec; stored verbatim).
    """

    context_id: str
    base: str
    position: int
    status: str
    updated_at: float
    segment: str

    def __post_init__(self) -> None:
        if not self.base:
            raise ValueError("a context delta needs the base it extends, got ''")
        if isinstance(self.position, bool) or not isinstance(self.position, int) or (
            self.position < 1
        ):
            raise ValueError(f"a delta position is an int >= 1, got {self.position!r}")


@dataclass(frozen=True, slots=True)
class Fence:
    """The writer's claim on a run, passed to ``ContextStore.save(record, fence=...)``.

    A store keeps the largest fencing token any fenced save of a record carried and refuses a
    fenced save whose token is smaller ("highest token wins, lower refused"); see
    :meth:`reactor.ports.ContextStore.save` and docs/workers.md, "Stale writers and fenced
    saves".

    Attributes:
        key: the lock key guarding the record (``async:<run id>`` for a run, the element lock
            key for a map element); informational, stores compare tokens only.
        owner: the lock owner token of the writer; informational.
        token: the fencing token of the writer's hold (``Lock.token``, >= 1; every fresh
            acquisition of a key gets a larger one: docs/coordination.md, "Fencing tokens").
    """

    key: str
    owner: str
    token: int

    def __post_init__(self) -> None:
        if isinstance(self.token, bool) or not isinstance(self.token, int) or self.token < 1:
            raise ValueError(f"a fence token is an int >= 1, got {self.token!r}")


@dataclass(frozen=True, slots=True)
class LockClaim:
    """A lock to take together with a record (docs/protocol.md, "Optional fast paths"): the
    arguments of ``LockStore.acquire``.

    Attributes:
        key: the lock key (``async:<run id>``, a map element's lock key).
        owner: the owner token taking it.
        ttl: seconds until it lapses unless extended; ``None`` = never.
    """

    key: str
    owner: str
    ttl: float | None


@dataclass(frozen=True, slots=True)
class RunSummary:
    """A row of a context scan: enough for a sweeper or a dashboard list.

    Attributes:
        context_id: the run id.
        reactor: the registered reactor name.
        status: the stored status string.
        created_at: epoch seconds.
        updated_at: epoch seconds of the last write.
        parent_context_id: as in :class:`ContextRecord`.
        dispatched_child: as in :class:`ContextRecord`.
    """

    context_id: str
    reactor: str
    status: str
    created_at: float
    updated_at: float
    parent_context_id: str | None = None
    dispatched_child: bool = False

    @classmethod
    def of(cls, record: ContextRecord) -> RunSummary:
        """Project a :class:`ContextRecord` to its summary row."""
        return cls(
            context_id=record.context_id,
            reactor=record.reactor,
            status=record.status,
            created_at=record.created_at,
            updated_at=record.updated_at,
            parent_context_id=record.parent_context_id,
            dispatched_child=record.dispatched_child,
        )


@dataclass(frozen=True, slots=True)
class RunPage:
    """One page of :meth:`ContextStore.page`.

    Attributes:
        runs: the rows of this page, newest first.
        next_cursor: an opaque cursor for the next page, or ``None`` at the end.
    """

    runs: tuple[RunSummary, ...]
    next_cursor: str | None


_Row = TypeVar("_Row")


class ScanPage(list[_Row]):
    """One page of a sweeper scan: the rows (it *is* a ``list`` of them) and the cursor after them.

    Returned by the ``scan`` methods of :class:`reactor.ports.ContextStore`,
    :class:`~reactor.ports.StepResultStore`, :class:`~reactor.ports.MapStore` and
    :class:`~reactor.ports.MapRollbackStore`. Being a list keeps every caller that treats a scan
    as a list of rows working; equality compares the rows only (docs/workers.md, "Sweep cursors
    and dispatch leases").

    Args:
        rows: the rows of this page, in the store's scan order.
        next_cursor: see the attribute.

    Attributes:
        next_cursor: an opaque string to pass back as ``cursor=`` to continue strictly after the
            last row *examined* by this page (rows a filter dropped included), or ``None`` when
            the scan reached the end of its index: the next scan then starts over from the
            beginning (wrap around). A non-``None`` cursor may come with fewer rows than asked
            for (even none); only ``None`` means "the end".
    """

    __slots__ = ("next_cursor",)

    def __init__(self, rows: Iterable[_Row] = (), next_cursor: str | None = None) -> None:
        super().__init__(rows)
        self.next_cursor = next_cursor

    def __repr__(self) -> str:
        return f"ScanPage({list.__repr__(self)}, next_cursor={self.next_cursor!r})"


StepResultStatus = Literal["dispatched", "completed"]


@dataclass(frozen=True, slots=True)
class StepResultRecord:
    """The Step Result Record of one ``async_step`` unit (docs/protocol.md#step-results).

    It lives outside the parent context because a worker writes it while the parent runs.
    A ``dispatched`` record is written before the enqueue and doubles as the step sweeper's
    input; a ``completed`` record carries the outcome.

    Attributes:
        context_id: the context that owns the step (a composed child may differ from the root).
        step_name: the step's name.
        status: ``"dispatched"`` or ``"completed"``.
        root_context_id: the root run, which the worker loads.
        reactor: the root's registered reactor name.
        dispatched_at: epoch seconds of the first dispatch (the park-timeout origin).
        updated_at: epoch seconds of this write.
        parked_until: while parked on contention, epoch seconds until which the step sweeper
            must not treat the unit as lost (delay plus a grace); else ``None``.
        waiting: the coordination key the parked unit waits on, for dashboards.
        contention_attempts: parks so far (bounded by ``lock_snooze_max_attempts``).
        outcome: codec JSON text of the unit's result once completed, else ``None``.
        data: engine bookkeeping that must survive a redelivery (e.g. the ordered-lock ticket),
            JSON-native values only.
    """

    context_id: str
    step_name: str
    status: StepResultStatus
    root_context_id: str
    reactor: str
    dispatched_at: float
    updated_at: float
    parked_until: float | None = None
    waiting: str | None = None
    contention_attempts: int = 0
    outcome: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MapMetadata:
    """The metadata of one fan-out map, written once when the map is initialised.

    Attributes:
        map_id: the map's id.
        count: the number of elements.
        parent_context_id: the context that owns the map step.
        parent_reactor: that context's registered reactor name.
        step_name: the map step's name in the parent.
        element_reactor: the registered name of the element reactor.
        owner_context_id: the top-level run the collector resumes.
        owner_reactor: its registered reactor name.
        batch_size: elements dispatched per throw.
        atomic: whether the first failure stops the map.
        created_at: epoch seconds.
        parent_is_map_element: whether the parent is itself a map element (its liveness lock is
            then ``map_element:<outer_map_id>:<outer_index>``).
        outer_map_id: see ``parent_is_map_element``.
        outer_index: see ``parent_is_map_element``.
        extra: further JSON-native settings the engine wants back verbatim.
    """

    map_id: str
    count: int
    parent_context_id: str
    parent_reactor: str
    step_name: str
    element_reactor: str
    owner_context_id: str
    owner_reactor: str
    batch_size: int
    atomic: bool
    created_at: float
    parent_is_map_element: bool = False
    outer_map_id: str | None = None
    outer_index: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ElementStart:
    """What a fan-out element job reads before it runs (``MapStore.begin_element``;
    docs/protocol.md#maps).

    Attributes:
        metadata: the map's metadata, ``None`` when the map is unknown or expired.
        settled: whether the element's result slot is already stored.
        failed_context: the map's first failed element context, ``None`` when none.
        position: the element-index position this call appended the element at, ``None``
            when it appended nothing.
    """

    metadata: MapMetadata | None
    settled: bool
    failed_context: str | None
    position: int | None = None


@dataclass(frozen=True, slots=True)
class MapRollbackMetadata:
    """The start-once metadata of a distributed map rollback (docs/protocol.md#map-rollbacks).

    Attributes:
        map_id: the map being rolled back.
        total: the number of element-index positions to roll back (fixed at start).
        batch_size: positions claimed per batch.
        step_name: the map step in the owner.
        owner_context_id: the run to resume when every position is settled.
        owner_reactor: its registered reactor name.
        element_reactor: the element reactor's registered name.
        started_at: epoch seconds; set by the adapter's caller.
        kind: ``"undo"`` or ``"compensate"``.
    """

    map_id: str
    total: int
    batch_size: int
    step_name: str
    owner_context_id: str
    owner_reactor: str
    element_reactor: str
    started_at: float
    kind: str = "undo"


RollbackOutcomeKind = Literal[
    "undone", "failed", "not_needed", "element_in_flight", "context_unavailable"
]

#: Outcomes that count as failures in :class:`RollbackSummary` (docs/protocol.md#map-rollbacks).
FAILED_ROLLBACK_OUTCOMES: frozenset[str] = frozenset(
    {"failed", "element_in_flight", "context_unavailable"}
)


@dataclass(frozen=True, slots=True)
class RollbackOutcome:
    """The settled outcome of one rollback position.

    Attributes:
        index: the element index rolled back, or ``None`` when the element context was gone.
        outcome: one of :data:`RollbackOutcomeKind`.
        failures: codec JSON text of the rollback failures (a list), ``"[]"`` when none.
    """

    index: int | None
    outcome: RollbackOutcomeKind
    failures: str = "[]"


@dataclass(frozen=True, slots=True)
class RollbackSummary:
    """Progress of a distributed map rollback, for dashboards.

    Attributes:
        total: positions to settle.
        settled: positions with an outcome.
        outstanding: ``total - settled``.
        failed: outcomes in :data:`FAILED_ROLLBACK_OUTCOMES`.
    """

    total: int
    settled: int
    outstanding: int
    failed: int


@dataclass(frozen=True, slots=True)
class LockInfo:
    """A lock's holder.

    Attributes:
        owner: the owner token.
        count: the re-entrancy count (at least 1).
        expires_at: epoch seconds when the lock lapses, or ``None`` for no expiry.
        token: the holder's fencing token, the value ``LockStore.acquire`` returned when this
            holder took the lock (>= 1; docs/coordination.md#fencing-tokens). It defaults to 0
            only so records serialized before tokens existed still load; a conforming store
            never reports 0 for a holder.
    """

    owner: str
    count: int
    expires_at: float | None
    token: int = 0


@dataclass(frozen=True, slots=True)
class SemaphoreState:
    """A counting semaphore as leases (docs/protocol.md#semaphores).

    Attributes:
        limit: the maximum number of concurrent holders.
        holders: ``{holder token: lease expiry in epoch seconds}``, unexpired holders only.
    """

    limit: int
    holders: Mapping[str, float]

    @property
    def available(self) -> int:
        """Slots free right now (never negative)."""
        return max(self.limit - len(self.holders), 0)


@dataclass(frozen=True, slots=True)
class RateWindow:
    """One fixed window of a multi-window rate limit.

    Attributes:
        name: a label for errors and dashboards (``"second"``, ``"minute"``, ``"60s"``).
        seconds: the window length in seconds (> 0); buckets are ``floor(now / seconds)``.
        limit: admissions allowed per bucket (>= 0).
    """

    name: str
    seconds: float
    limit: int

    def __post_init__(self) -> None:
        if not (self.seconds > 0 and math.isfinite(self.seconds)):
            raise ValueError(f"RateWindow.seconds must be a positive number, got {self.seconds!r}")
        if self.limit < 0:
            raise ValueError(f"RateWindow.limit must be >= 0, got {self.limit!r}")


@dataclass(frozen=True, slots=True)
class RateDecision:
    """The answer of a multi-window rate-limit hit.

    Attributes:
        allowed: whether every window admitted (and was charged).
        retry_after: seconds until the denying window rolls over (0 when allowed).
        window_index: 0-based index of the first denying window, ``None`` when allowed.
    """

    allowed: bool
    retry_after: float = 0.0
    window_index: int | None = None


@dataclass(frozen=True, slots=True)
class PeriodMarker:
    """A once-per-bucket marker.

    Attributes:
        context_id: the run that claimed the bucket, when given.
        marked_at: epoch seconds of the claim.
    """

    context_id: str | None
    marked_at: float


@dataclass(frozen=True, slots=True)
class ScheduleRecord:
    """One stored schedule (docs/protocol.md, "Schedules"): its definition when it was added
    with ``reactor schedules add``, and the scheduler's state (pause, ticks settled, the
    pending decision) in one document.

    Attributes:
        name: the schedule's name (the store's key).
        document: the JSON text written by :mod:`reactor.schedules.records`; stored verbatim.
        version: an opaque token that changes on every write (the compare-and-set handle of
            ``ScheduleStore.put`` and ``delete``).
    """

    name: str
    document: str
    version: str


@dataclass(frozen=True, slots=True)
class OrderedTicket:
    """A place in an ordered lock's line (docs/protocol.md#ordered-locks, ``assign``).

    Attributes:
        nonce: 1-based position in the current batch.
        epoch: the batch generation: every new batch of a key gets an epoch strictly greater
            than any earlier one, also after the line idled out or was reset
            (docs/coordination.md#fencing-tokens); 0 is a legacy ticket that is never fenced.
    """

    nonce: int
    epoch: int

    @property
    def fencing_key(self) -> tuple[int, int]:
        """The ticket's fencing token: ``(epoch, nonce)``, compared lexicographically.

        A later ticket of the same key always has a greater key: a later batch has a greater
        epoch, and within a batch nonces grow. A resource guarded by an ordered lock rejects a
        write whose key is smaller than the largest it has accepted
        (docs/coordination.md#fencing-tokens).

        Returns:
            ``(epoch, nonce)``.
        """
        return (self.epoch, self.nonce)


OrderedGateState = Literal["go", "poison_advance", "wait", "stale", "drained_go"]


@dataclass(frozen=True, slots=True)
class OrderedGate:
    """The answer of ``ordered_locks.can_proceed``.

    Attributes:
        state: ``go`` (your turn), ``poison_advance`` (your turn after skipping dead blockers),
            ``wait`` (not yet), ``stale`` (your epoch was fenced), ``drained_go`` (the batch was
            drained; nothing was mutated).
        retry_after: seconds to wait before asking again (``wait`` only, at least 1).
        last_completed: the cursor after the call.
        first_failed: the smallest failed nonce ahead of the cursor, 0 when none.
    """

    state: OrderedGateState
    retry_after: float
    last_completed: int
    first_failed: int


@dataclass(frozen=True, slots=True)
class OrderedLockState:
    """An operator's view of an ordered lock (``peek``); all zeros when drained.

    Attributes:
        next_nonce: the last assigned nonce.
        last_completed: the cursor.
        first_failed: 0 when none.
        epoch: the current batch generation (0 when never used or expired).
        in_flight: ``{nonce: assigned_at epoch seconds}`` for nonces ahead of the cursor.
    """

    next_nonce: int
    last_completed: int
    first_failed: int
    epoch: int
    in_flight: Mapping[int, float]

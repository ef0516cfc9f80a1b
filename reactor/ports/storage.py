"""The storage protocol: everything the engine persists, grouped by concern.

One :class:`Storage` object per process gives the engine a set of small sub-stores
(docs/protocol.md#storage). Each sub-store is a runtime-checkable :class:`typing.Protocol`, so an
adapter is a set of small classes sharing one client, each testable on its own with the contract
suite (:mod:`reactor_contract`).

Rules every adapter follows (the contract suite checks each one):

* **Clock.** Expiry and leases are judged by :meth:`Storage.now` (the store's clock where it has
  one: Redis ``TIME``, MongoDB ``$$NOW``; DynamoDB uses the application clock).
* **Logical expiry.** A record whose ``expires_at <= now`` reads as absent in every read and
  every conditional write. Native TTL deletion is only garbage collection.
* **TTL ``None`` means no expiry**, everywhere.
* **Retention.** Durable run state (contexts, step results, map and rollback records, claims)
  lives ``context_ttl`` seconds after its last write and is re-stamped on every write,
  counters included, so an aggregate never expires before its members.
* **Return values.** NX claims return ``bool`` (or the winner, where documented); counters
  return the new ``int``; absent reads return ``None``.
* **Errors.** Backend failures raise :class:`reactor.StorageError` with the original chained;
  losing a conditional write is a normal ``False``/``None``, never an exception.
* **Scans** are indexed queries, never full-keyspace walks.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from reactor.model.records import (
    ContextRecord,
    Fence,
    LockInfo,
    MapMetadata,
    MapRollbackMetadata,
    OrderedGate,
    OrderedLockState,
    OrderedTicket,
    PeriodMarker,
    RateDecision,
    RateWindow,
    RollbackOutcome,
    RunPage,
    RunSummary,
    ScanPage,
    ScheduleRecord,
    SemaphoreState,
    StepResultRecord,
)

__all__ = [
    "Capabilities",
    "ClaimStore",
    "ContextStore",
    "LockStore",
    "MapRollbackStore",
    "MapStore",
    "OrderedLockStore",
    "PeriodStore",
    "RateLimitStore",
    "ScheduleStore",
    "SemaphoreStore",
    "SignalStore",
    "StepResultStore",
    "Storage",
    "Subscription",
    "SweepCursorStore",
]


@runtime_checkable
class ContextStore(Protocol):
    """Run contexts, one JSON document per run (docs/protocol.md#contexts).

    Incremental checkpoints (``append``) are an optional capability on top:
    :class:`reactor.ports.capabilities.AppendsContexts` (docs/protocol.md, "Capabilities").
    """

    def save(self, record: ContextRecord, *, fence: Fence | None = None) -> None:
        """Write a whole context and re-stamp its retention to ``context_ttl``, unless fenced
        off. The record replaces what is stored: its ``base``, its ``document`` and its
        ``segments`` (the engine's full saves have none; a record as :meth:`load` returned it
        is stored back as it was); the previous base's segments are dropped.

        The record keeps the largest fencing token any fenced save of it carried (its *fence*,
        stored beside the record, never part of :class:`ContextRecord`). The rule, checked in
        the same atomic write as the write itself (one compare-and-set, one script):

        * ``fence=None``: the write always happens (last writer wins, as before) and the stored
          fence is kept;
        * ``fence`` given: refused when the stored fence is greater than ``fence.token``
          (:class:`~reactor.errors.StaleWriterError`, nothing written); otherwise the
          write happens and the stored fence becomes ``fence.token`` ("highest token wins,
          lower refused"). A record without a stored fence (absent, or written before fences
          existed, or only ever unfenced) accepts any fenced save.

        A take-over of a run always acquires a larger token (docs/coordination.md, "Fencing
        tokens"), so a writer that stalled past its lock's TTL can never overwrite the run once
        the new holder saved it (docs/workers.md, "Stale writers and fenced saves").

        Args:
            record: the context to write.
            fence: the writer's hold on the lock guarding the record, or ``None``.

        Raises:
            StaleWriterError: ``fence.token`` is lower than the record's stored fence (nothing
                is written).
            ContextTooLargeError: the document exceeds the backend's document limit
                (nothing is written).
            StorageError: the backend failed.
        """
        ...

    def load(self, context_id: str) -> ContextRecord | None:
        """Read a context by id, or ``None`` when absent or expired.

        Returns:
            The record: its ``document`` (the base) and, in order, every segment appended to
            that base (:meth:`reactor.ports.capabilities.AppendsContexts.append`); a segment
            appended to an earlier base is never returned.
        """
        ...

    def delete(self, context_id: str) -> bool:
        """Delete a context and its segments; ``True`` when something was deleted."""
        ...

    def scan(
        self,
        *,
        statuses: Collection[str] | None = None,
        limit: int = 1000,
        include_dispatched_children: bool = False,
        cursor: str | None = None,
    ) -> ScanPage[RunSummary]:
        """List top-level runs for the run sweeper.

        Keyset-paged like :meth:`page`: pass the previous page's ``next_cursor`` as ``cursor``
        to continue after it (docs/workers.md, "Sweep cursors and dispatch leases"). A run
        present for a whole pass (from a ``cursor=None`` page to the page whose
        ``next_cursor`` is ``None``) is listed at least once in that pass.

        Args:
            statuses: only runs in these statuses; the filter applies before ``limit``.
            limit: the maximum number of rows.
            include_dispatched_children: also list ``async_reactor`` children
                (``dispatched_child``); map elements and other children are never listed.
            cursor: ``None`` to start at the beginning, else a ``next_cursor`` of this store.

        Returns:
            Summaries in the store's scan order (no other order is guaranteed), as a
            :class:`~reactor.model.records.ScanPage` (a list with ``next_cursor``).

        Raises:
            ValueError: the cursor is malformed.
            StorageError: the backend failed.
        """
        ...

    def page(
        self,
        *,
        cursor: str | None = None,
        limit: int = 50,
        statuses: Collection[str] | None = None,
        reactor: str | None = None,
        created_from: float | None = None,
        created_to: float | None = None,
    ) -> RunPage:
        """List top-level runs newest first for dashboards; every run appears once across pages.

        The filters are optional (docs/protocol.md, "Filtered pages"): the time range bounds
        the walk over the page index; a status or reactor filter skips rows, and one call
        then examines a bounded number of index entries, so a page may hold fewer rows than
        ``limit`` (even none) and still carry a cursor. :func:`reactor.ports.run_pages.
        collect_page` implements the rules for any store.

        Args:
            cursor: ``None`` for the first page, else the previous page's ``next_cursor``.
            limit: rows per page (>= 1).
            statuses: only runs in one of these statuses (``None``: all).
            reactor: only runs of this registered reactor name (``None``: all).
            created_from: only runs created at or after these epoch seconds.
            created_to: only runs created before these epoch seconds.

        Raises:
            ValueError: the cursor or a filter is malformed.
        """
        ...


@runtime_checkable
class StepResultStore(Protocol):
    """Step Result Records of ``async_step`` units (docs/protocol.md#step-results)."""

    def put(self, record: StepResultRecord) -> None:
        """Write a record; last writer wins; re-stamps retention."""
        ...

    def get(self, context_id: str, step_name: str) -> StepResultRecord | None:
        """Read the record of ``step_name`` owned by ``context_id``, or ``None``."""
        ...

    def scan(
        self, *, status: str | None = None, limit: int = 1000, cursor: str | None = None
    ) -> ScanPage[StepResultRecord]:
        """List records, filtered by ``status`` before ``limit`` (the step sweeper's input).

        Keyset-paged: pass the previous page's ``next_cursor`` as ``cursor`` to continue after
        it; ``next_cursor`` is ``None`` at the end of the index (docs/workers.md, "Sweep
        cursors and dispatch leases").

        Raises:
            ValueError: the cursor is malformed.
            StorageError: the backend failed.
        """
        ...


@runtime_checkable
class MapStore(Protocol):
    """Forward state of fan-out maps (docs/protocol.md#maps).

    Result slots are index-keyed: re-storing index *i* overwrites it. Completion is judged by
    the slots (:meth:`missing_indices`), not by the counter.

    Reading the counter and the element index by position (``counter``, ``element_ids``,
    ``element_id``) is an optional capability the engine never uses:
    :class:`reactor.ports.capabilities.InspectsMaps` (docs/protocol.md, "Capabilities").
    """

    def init(self, metadata: MapMetadata) -> bool:
        """Create the map's metadata and set its counter to ``metadata.count``, atomically.

        Returns:
            ``True`` when created; ``False`` when the map already existed (nothing changes).
        """
        ...

    def metadata(self, map_id: str) -> MapMetadata | None:
        """Read a map's metadata."""
        ...

    def scan(self, *, limit: int = 1000, cursor: str | None = None) -> ScanPage[MapMetadata]:
        """List active maps for the map sweeper (never rollback records).

        A map is active from :meth:`init` until it settles: :meth:`claim_owner_signal` takes it
        out of this index. Keyset-paged: pass the previous page's ``next_cursor`` as
        ``cursor`` to continue after it; ``next_cursor`` is ``None`` at the end of the index
        (docs/workers.md, "Sweep cursors and dispatch leases").

        Raises:
            ValueError: the cursor is malformed.
            StorageError: the backend failed.
        """
        ...

    def add_to_counter(self, map_id: str, delta: int) -> int:
        """Atomically add ``delta`` (may be negative) to the counter; returns the new value."""
        ...

    def init_offset(self, map_id: str, value: int) -> bool:
        """Set the dispatch offset if it was never set (NX); ``True`` when this call set it."""
        ...

    def offset(self, map_id: str) -> int | None:
        """Read the dispatch offset, ``None`` when never set."""
        ...

    def advance_offset(self, map_id: str, amount: int) -> int:
        """Atomically add ``amount`` to the offset and return the new value (a batch reservation).

        The caller's batch is ``[new - amount, new)``; the offset may grow past ``count``.
        """
        ...

    def set_failed_context(self, map_id: str, context_id: str) -> bool:
        """Record the first failed element context (NX); ``True`` when this call won."""
        ...

    def failed_context(self, map_id: str) -> str | None:
        """Read the first failed element context id."""
        ...

    def claim_owner_signal(self, map_id: str) -> bool:
        """Claim the right to resume the owner (NX): exactly one caller ever gets ``True``.

        The map is then settled: every call, winner or loser, also takes it out of
        :meth:`scan` (a loser repairs a crash between the claim and that removal); from then
        on the run sweeper, not the map sweeper, recovers the owner (docs/workers.md, "Sweep
        cursors and dispatch leases").
        """
        ...

    def put_result(self, map_id: str, index: int, value: str) -> None:
        """Store (overwrite) result slot ``index`` with codec JSON text."""
        ...

    def results_page(self, map_id: str, *, offset: int, limit: int) -> list[tuple[int, str]]:
        """Present slots among indexes ``offset .. offset+limit-1``, in index order."""
        ...

    def result_slots(self, map_id: str, indexes: Sequence[int]) -> list[str | None]:
        """Slots aligned with ``indexes``; ``None`` where missing."""
        ...

    def count_results(self, map_id: str) -> int:
        """The number of present slots."""
        ...

    def missing_indices(self, map_id: str, count: int) -> list[int]:
        """Ascending indexes in ``[0, count)`` that have no slot (authoritative completion)."""
        ...

    def append_element(self, map_id: str, context_id: str) -> int:
        """Append an element context id to the append-only index; returns its 0-based position.

        Positions never shift; duplicates are allowed.
        """
        ...

    def count_elements(self, map_id: str) -> int:
        """The number of appended element ids."""
        ...

    def element_ids_from_tail(
        self, map_id: str, *, position: int, count: int, total: int
    ) -> list[str]:
        """Ids at tail positions ``position .. position+count-1`` of the first ``total`` entries.

        Tail position 0 is entry ``total - 1``. Anchoring at ``total`` means a late append never
        shifts positions (docs/protocol.md#maps). Returns tail-first order, ``[]`` past the head.
        """
        ...


@runtime_checkable
class MapRollbackStore(Protocol):
    """Distributed map rollback state (docs/protocol.md#map-rollbacks).

    Progress reads the engine never uses (``indexes_seen``, ``summary``) are an optional
    capability: :class:`reactor.ports.capabilities.InspectsMapRollbacks` (docs/protocol.md,
    "Capabilities").
    """

    def start(self, metadata: MapRollbackMetadata) -> tuple[bool, MapRollbackMetadata]:
        """Create the rollback metadata once (NX on the whole record).

        Returns:
            ``(True, metadata)`` when created, else ``(False, the first caller's metadata)``.
        """
        ...

    def metadata(self, map_id: str) -> MapRollbackMetadata | None:
        """Read the rollback metadata."""
        ...

    def claim_positions(self, map_id: str, count: int) -> range:
        """Atomically add ``count`` to the claim offset; returns the claimed positions.

        The range is ``[stop - count, min(stop, total))`` where ``stop`` is the new offset; the
        stored offset is not clipped (claims of 2,2,2,2 against total 5 give 0..2, 2..4, 4..5,
        empty; the offset then reads 8).
        """
        ...

    def offset(self, map_id: str) -> int:
        """The claim offset, 0 when never claimed."""
        ...

    def put_outcome(self, map_id: str, position: int, outcome: RollbackOutcome) -> bool:
        """Store the outcome of ``position``, first writer wins; ``True`` when stored.

        A stored outcome with a non-``None`` index also marks that index as seen.
        """
        ...

    def outcome(self, map_id: str, position: int) -> RollbackOutcome | None:
        """Read one position's outcome."""
        ...

    def count_outcomes(self, map_id: str) -> int:
        """The number of settled positions."""
        ...

    def outcome_positions(self, map_id: str) -> list[int]:
        """Settled positions, ascending."""
        ...

    def outcomes(
        self, map_id: str, *, page_size: int = 500
    ) -> Iterator[tuple[int, RollbackOutcome]]:
        """Yield ``(position, outcome)`` in position order, reading ``page_size`` at a time."""
        ...

    def mark_handed_off(self, map_id: str) -> None:
        """Record that the owner saved itself as ``rolling_back`` (idempotent)."""
        ...

    def handed_off(self, map_id: str) -> bool:
        """Whether :meth:`mark_handed_off` was called."""
        ...

    def claim_signal(self, map_id: str) -> bool:
        """Claim the right to resume the owner after the rollback (NX): exactly one ``True``.

        The rollback is then finished: the call also takes it out of :meth:`scan`; the run
        sweeper recovers the owner from then on (docs/workers.md, "Sweep cursors and dispatch
        leases").
        """
        ...

    def scan(
        self, *, limit: int = 1000, cursor: str | None = None
    ) -> ScanPage[MapRollbackMetadata]:
        """List started, unfinished rollbacks for the map sweeper's rollback pass.

        A rollback is listed from :meth:`start` until :meth:`claim_signal`. Keyset-paged: pass
        the previous page's ``next_cursor`` as ``cursor`` to continue after it; ``next_cursor``
        is ``None`` at the end of the index (docs/workers.md, "Sweep cursors and dispatch
        leases").

        Raises:
            ValueError: the cursor is malformed.
            StorageError: the backend failed.
        """
        ...


@runtime_checkable
class ClaimStore(Protocol):
    """First-writer-wins claims (docs/protocol.md#claims)."""

    def claim_correlation_id(self, correlation_id: str, context_id: str) -> str | None:
        """Map a correlation id to a run, first writer wins.

        Returns:
            ``None`` when ``context_id`` now holds it (new, or already the same);
            otherwise the other holder's context id (nothing changes).
        """
        ...

    def correlation_context(self, correlation_id: str) -> str | None:
        """The run holding a correlation id."""
        ...

    def release_correlation_id(self, correlation_id: str) -> bool:
        """Delete a correlation mapping; ``True`` when something was deleted."""
        ...

    def claim_idempotency_key(self, reactor: str, key: str, context_id: str) -> str | None:
        """Claim a run idempotency key for ``reactor``.

        Returns:
            ``None`` when this call claimed it; otherwise the holder's context id.
        """
        ...

    def release_idempotency_key(self, reactor: str, key: str, context_id: str) -> bool:
        """Compare-and-delete: only the holder ``context_id`` can release; ``True`` on success."""
        ...

    def reclaim_idempotency_key(
        self, reactor: str, key: str, from_context_id: str, to_context_id: str
    ) -> bool:
        """Move the key from ``from_context_id`` to ``to_context_id`` (CAS); re-stamps retention."""
        ...

    def claim_interrupt_resume(self, context_id: str, step_path: str, payload: str) -> bool:
        """Claim the resume of an interrupt (NX per run and step path), holding the payload."""
        ...

    def interrupt_resumes(self, context_id: str, step_paths: Sequence[str]) -> dict[str, str]:
        """``{step_path: payload}`` for the claimed step paths only."""
        ...

    def increment_interrupt_attempts(self, context_id: str, step_path: str) -> int:
        """Count an invalid resume attempt; returns the new count."""
        ...


@runtime_checkable
class LockStore(Protocol):
    """Re-entrant, owner-tokened TTL locks.

    Semantics: docs/protocol.md#locks; pure model: ``reactor.model.coordination.locks``.
    Every acquisition issues a fencing token: docs/coordination.md#fencing-tokens; what an
    adapter must store for it: docs/writing-an-adapter.md.
    """

    def acquire(self, key: str, owner: str, ttl: float | None) -> int:
        """Take the lock, or re-enter it when ``owner`` holds it (count + 1, TTL reset).

        Callers may keep testing the result for truth: 0 is falsy, every token is truthy.

        Args:
            key: the lock key.
            owner: the owner token.
            ttl: seconds until the lock lapses, ``None`` for no expiry.

        Returns:
            0 when another owner holds the lock. Otherwise the holder's fencing token (>= 1,
            < 2**53): a fresh acquisition (absent, released or lapsed lock, or a new owner) gets
            a token strictly greater than every token this key ever returned, across release,
            idle expiry and process restarts; a re-entry returns the current token unchanged
            (docs/coordination.md#fencing-tokens).

        Raises:
            ValueError: ``ttl`` is neither ``None`` nor a positive finite number.
            StorageError: the backend failed.
        """
        ...

    def release(self, key: str, owner: str) -> bool:
        """Decrement the count when ``owner`` holds the lock; else ``False``.

        At count 0 the lock is free; the store keeps its last fencing token for
        ``FENCE_RETENTION`` seconds (docs/coordination.md#fencing-tokens).
        """
        ...

    def extend(self, key: str, owner: str, ttl: float | None) -> bool:
        """Set the remaining TTL to ``ttl`` (never adds) when ``owner`` holds it; else ``False``."""
        ...

    def held(self, key: str) -> bool:
        """Whether anyone holds the lock (the sweepers' liveness test)."""
        ...

    def info(self, key: str) -> LockInfo | None:
        """The holder (owner, count, expiry, fencing token), or ``None`` when not held."""
        ...


@runtime_checkable
class SemaphoreStore(Protocol):
    """Counting semaphores as per-holder leases.

    Semantics: docs/protocol.md#semaphores; pure model: ``reactor.model.coordination.semaphores``.
    The operators' ``reset`` is an optional capability the engine never uses:
    :class:`reactor.ports.capabilities.ResetsSemaphores` (docs/protocol.md, "Capabilities").
    """

    def acquire(self, key: str, holder: str, limit: int, lease: float) -> bool:
        """Lease a slot for ``holder`` when fewer than ``limit`` unexpired holders exist.

        Initialisation is implicit and atomic. A holder that already has a slot keeps it and
        its lease is renewed (``True``). ``lease`` is in seconds.
        """
        ...

    def release(self, key: str, holder: str) -> bool:
        """Remove ``holder``'s lease; ``False`` when it holds none (expired, double release)."""
        ...

    def extend(self, key: str, holder: str, lease: float) -> bool:
        """Renew ``holder``'s lease to ``lease`` seconds from now; ``False`` when it holds none."""
        ...

    def state(self, key: str) -> SemaphoreState | None:
        """Limit and unexpired holders, ``None`` when the semaphore was never used or is empty."""
        ...


@runtime_checkable
class RateLimitStore(Protocol):
    """Multi-window fixed-window rate limits (docs/protocol.md#rate-limits)."""

    def hit(self, key: str, windows: Sequence[RateWindow]) -> RateDecision:
        """Check every window and, only if all admit, charge all of them (all or none).

        Buckets are ``floor(now / window.seconds)`` on the store clock; a bucket's counter lives
        2 x its window. A key's clock never goes back: a window is judged in the newer of the
        caller's bucket and the stored one (a caller whose clock is behind is counted in the
        newest stored bucket, which is never replaced by an older one), a denial's
        ``retry_after`` runs on the caller's clock to the end of that bucket, and a denial
        remembers a newer bucket it reached (docs/coordination.md#clock-skew;
        :mod:`reactor.model.coordination.rate_limits`).
        """
        ...

    def count(self, key: str, window: RateWindow) -> int:
        """Admissions charged in the current (newest reached) bucket of ``window``."""
        ...


@runtime_checkable
class PeriodStore(Protocol):
    """Once-per-bucket markers, mark-if-absent, first wins (docs/protocol.md#periods)."""

    def mark(self, key: str, *, ttl: float | None, context_id: str | None = None) -> bool:
        """Mark ``key`` (already bucketed by the caller) if absent; ``True`` when this call won."""
        ...

    def marker(self, key: str) -> PeriodMarker | None:
        """The marker, ``None`` when unmarked or expired."""
        ...


@runtime_checkable
class OrderedLockStore(Protocol):
    """Nonce sequencing with an epoch fence and a poison pill (docs/protocol.md#ordered-locks)."""

    def assign(self, key: str, *, ttl: float) -> OrderedTicket:
        """Take the next nonce and start its liveness timer.

        A fresh batch (nonce 1) gets an epoch strictly greater than every earlier epoch of the
        key, also after the line idled out or was :meth:`reset`:
        ``max(previous epoch + 1, storage clock in µs)``; the ticket's
        :attr:`~reactor.model.records.OrderedTicket.fencing_key` ``(epoch, nonce)`` is its
        fencing token (docs/coordination.md#fencing-tokens).
        """
        ...

    def can_proceed(
        self, key: str, ticket: OrderedTicket, *, poison_pill_timeout: float
    ) -> OrderedGate:
        """Ask whether ``ticket`` may run now (heartbeats its timer; drains dead blockers)."""
        ...

    def advance(self, key: str, ticket: OrderedTicket, *, failed: bool, ttl: float) -> int:
        """Complete ``ticket``; returns the cursor after the call (see the model for fences/GC)."""
        ...

    def heartbeat(self, key: str, ticket: OrderedTicket) -> bool:
        """Restamp ``ticket``'s timer; ``False`` when fenced or the timer is gone."""
        ...

    def skip(self, key: str, nonce: int) -> int:
        """Operator escape hatch: force the cursor to ``nonce``; returns the cursor."""
        ...

    def reset(self, key: str) -> None:
        """Operator: delete everything, epoch included (:meth:`peek` reads all zeros).

        The last epoch is retained, unreadable, for ``FENCE_RETENTION`` seconds so the next
        batch still gets a greater one (docs/coordination.md#fencing-tokens).
        """
        ...

    def peek(self, key: str) -> OrderedLockState:
        """Read the state without changing it (all zeros when drained)."""
        ...


@runtime_checkable
class Subscription(Protocol):
    """A live subscription to one signal channel; close it when done."""

    def get(self, timeout: float) -> str | None:
        """Wait up to ``timeout`` seconds for a message; ``None`` on timeout."""
        ...

    def close(self) -> None:
        """Stop listening and free the connection."""
        ...


@runtime_checkable
class SignalStore(Protocol):
    """Optional best-effort pub/sub that only shortens waits (docs/protocol.md#signals).

    Never load-bearing: the completing side writes its durable record first, and waiters always
    re-check it, so a lost message costs latency, never correctness.
    """

    def publish(self, channel: str, message: str) -> None:
        """Publish; never raises for a missing subscriber."""
        ...

    def subscribe(self, channel: str) -> Subscription:
        """Start listening on ``channel`` (messages published after this call are delivered)."""
        ...


@runtime_checkable
class SweepCursorStore(Protocol):
    """Where each sweeper keeps its scan cursor between ticks (docs/workers.md, "Sweep cursors
    and dispatch leases").

    Optional: a storage offers it as the attribute ``sweep_cursors`` and so declares
    :class:`reactor.ports.capabilities.KeepsSweepCursors` (the generic stores and Redis do). It
    is not a member of :class:`Storage`, so an adapter without it still conforms; its sweepers
    then keep their cursors in process memory.
    """

    def load(self, sweeper: str) -> str | None:
        """The cursor saved for ``sweeper`` (``"runs"``, ``"steps"``, ``"maps"``,
        ``"map_rollbacks"``), ``None`` when none is saved (or it expired).

        Raises:
            StorageError: the backend failed.
        """
        ...

    def save(self, sweeper: str, cursor: str | None) -> None:
        """Save ``sweeper``'s cursor, last writer wins; ``None`` means "start over".

        The record lives ``context_ttl`` seconds after its last save.

        Raises:
            StorageError: the backend failed.
        """
        ...


@runtime_checkable
class ScheduleStore(Protocol):
    """Stored schedules: one versioned document per schedule name, written by compare-and-set
    (docs/protocol.md, "Schedules"; docs/schedules.md).

    Optional: a storage offers it as the attribute ``schedules`` and so declares
    :class:`reactor.ports.capabilities.KeepsSchedules` (the generic stores and Redis do).
    Records never expire: a schedule is configuration, kept until it is removed. Documents are
    opaque JSON text the store keeps verbatim.
    """

    def get(self, name: str) -> ScheduleRecord | None:
        """The schedule ``name``, ``None`` when none is stored.

        Raises:
            StorageError: the backend failed.
        """
        ...

    def put(self, name: str, document: str, *, expected_version: str | None) -> str | None:
        """Write ``document`` under ``name`` if the stored version is ``expected_version``
        (``None``: only if no schedule ``name`` is stored), atomically.

        Returns:
            The new version (a token never issued before), or ``None`` when the stored
            version differed (nothing written).

        Raises:
            StorageError: the backend failed.
        """
        ...

    def delete(self, name: str, *, expected_version: str) -> bool:
        """Delete ``name`` if its stored version is ``expected_version``, atomically.

        Returns:
            ``True`` when this call deleted it.

        Raises:
            StorageError: the backend failed.
        """
        ...

    def scan(self, *, after: str | None = None, limit: int = 100) -> list[ScheduleRecord]:
        """Stored schedules in ascending name order (code point order), names strictly
        after ``after``, at most ``limit`` (at least 1).

        Raises:
            ValueError: ``limit`` is below 1.
            StorageError: the backend failed.
        """
        ...


@dataclass(frozen=True, slots=True)
class Capabilities:
    """Optional parts an adapter has.

    Attributes:
        signals: :attr:`Storage.signals` is a working :class:`SignalStore`.
        max_document_bytes: the backend's largest context document, ``None`` when unbounded
            (MongoDB: 16 MiB; DynamoDB: 400 KB).
        clock: where :meth:`Storage.now` comes from: ``"server"`` or ``"application"``.
        clock_skew: seconds by which the clocks of two processes sharing the store may differ
            (0 for a server clock or a single process). A holder shortens its own deadline by
            it, because a process whose clock runs ahead may take a lapsed lease that much
            early (``docs/coordination.md``, "Clock skew").
    """

    signals: bool = False
    max_document_bytes: int | None = None
    clock: str = "server"
    clock_skew: float = 0.0


@runtime_checkable
class Storage(Protocol):
    """Everything the engine persists (docs/protocol.md#storage), one object per process."""

    contexts: ContextStore
    step_results: StepResultStore
    maps: MapStore
    map_rollbacks: MapRollbackStore
    claims: ClaimStore
    locks: LockStore
    semaphores: SemaphoreStore
    rate_limits: RateLimitStore
    periods: PeriodStore
    ordered_locks: OrderedLockStore
    signals: SignalStore | None
    capabilities: Capabilities

    def now(self) -> float:
        """The store's clock in epoch seconds."""
        ...

    def close(self) -> None:
        """Release connections and threads; idempotent."""
        ...

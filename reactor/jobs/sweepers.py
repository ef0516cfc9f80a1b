"""The sweepers: recover units of work lost with a dead worker (docs/workers.md,
"Sweep cursors and dispatch leases").

Each sweeper works only through :class:`reactor.ports.Storage` and :class:`reactor.ports.Router`:
it scans records that say "in flight", checks the unit's liveness lock
(:mod:`reactor.model.keys`), and re-enqueues identity-only jobs for units whose lock is gone.
Re-dispatching a live unit is harmless (the duplicate meets the live lock and drops itself),
so sweeps are idempotent. One bad record never aborts a sweep: it is logged and counted.

Two things keep sweeps bounded however much is stored (docs/workers.md, "Sweep cursors and
dispatch leases"):

* **Cursors.** Each sweeper (``runs``, ``steps``, ``maps``, ``map_rollbacks``) reads one page of
  at most ``limit`` records per sweep, from where its previous sweep stopped: the scan's
  ``next_cursor`` is saved in ``storage.sweep_cursors`` (:class:`reactor.ports.SweepCursorStore`;
  process memory for a storage without one) and wraps to the start at the end of the index.
  :func:`scan_pages` follows cursors and raises :class:`ScanCursorError` on one that does not
  advance.
* **Dispatch leases.** Before re-enqueueing a unit a sweeper marks it
  (:func:`reactor.model.keys.sweep_dispatch_key`, a :class:`reactor.ports.PeriodStore` marker
  with a TTL): while the mark lives, no sweep re-enqueues the unit again, so a job that is
  merely still queued is not duplicated every tick. The lease grows with the time since the
  unit's first re-dispatch of the episode (:class:`DispatchLease`), so a fleet drains whatever
  the queue latency.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from reactor.engine.dispatch_leases import (
    DEFAULT_LEASE,
    LEASE_GROWTH,
    LEASE_INTERVALS,
    MIN_LEASE_SECONDS,
    DispatchLease,
    run_unit,
    step_unit,
)
from reactor.engine.maps.rollback import dispatch_rollback_batch
from reactor.errors import DeserializationError, ScanCursorError
from reactor.model import checkpoints
from reactor.model.keys import (
    map_collect_key,
    map_element_key,
    run_liveness_key,
    step_liveness_key,
    sweep_dispatch_key,
    sweep_episode_key,
)
from reactor.model.records import ContextRecord, MapMetadata
from reactor.model.run_documents import map_membership_of
from reactor.model.status import RunStatus
from reactor.model.text import escaping_logger
from reactor.ports.capabilities import KeepsSweepCursors, declares
from reactor.ports.payloads import (
    MapCollectPayload,
    MapElementPayload,
    MapElementRollbackPayload,
    RunPayload,
    StepPayload,
    job,
)
from reactor.ports.router import Router
from reactor.ports.storage import Storage, SweepCursorStore

__all__ = [
    "DEFAULT_LEASE",
    "LEASE_GROWTH",
    "LEASE_INTERVALS",
    "MAX_EMPTY_PAGES",
    "MIN_LEASE_SECONDS",
    "SWEEPERS",
    "DispatchLease",
    "MapSweepCounts",
    "ScanCursorError",
    "SweepCounts",
    "scan_pages",
    "sweep_maps",
    "sweep_runs",
    "sweep_sleeping_runs",
    "sweep_steps",
]

log = escaping_logger("reactor.sweeper")

#: Owner statuses after which a map must not be re-collected.
_COLLECTED_OWNER_STATUSES = frozenset(
    {
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.HALTED,
        RunStatus.CANCELLED,
        RunStatus.ROLLING_BACK,
        RunStatus.ABORTED,
    }
)


T = TypeVar("T")

#: The sweepers that keep a cursor, by name (the keys of ``storage.sweep_cursors``).
SWEEPERS: tuple[str, ...] = ("runs", "steps", "maps", "map_rollbacks", "sleeps")

#: Empty pages :func:`scan_pages` follows in one call before handing the cursor back.
MAX_EMPTY_PAGES = 100


@dataclass(frozen=True, slots=True)
class SweepCounts:
    """What one sweep did.

    Attributes:
        inspected: records looked at.
        redispatched: jobs re-enqueued.
        errors: records skipped because inspecting them raised.
        leased: lost units left alone because an earlier re-dispatch's lease still stands.
        wrapped: the scan reached the end of its index (the next sweep starts over).
        waiting: runs left alone because the unit they wait for is still in flight (the run
            sweeper only; docs/workers.md, "Sweep cursors and dispatch leases").
        settling: units left alone because their record was written within the lease's
            settle time: their job is taken as still queued (:class:`DispatchLease`).
    """

    inspected: int = 0
    redispatched: int = 0
    errors: int = 0
    leased: int = 0
    wrapped: bool = False
    waiting: int = 0
    settling: int = 0


@dataclass(frozen=True, slots=True)
class MapSweepCounts:
    """What one map sweep did (mirrors ``Map::Sweeper.run_once``'s return value).

    Attributes:
        inspected: maps and rollbacks looked at.
        redispatched: missing element indices re-enqueued.
        recollected: collectors re-triggered.
        rollback_redispatched: rollback positions re-enqueued.
        rollback_batches: lost rollback batch triggers re-claimed.
        errors: records skipped because inspecting them raised.
        batches: lost forward batch triggers re-claimed (fan-out maps).
        leased: lost units left alone because an earlier re-dispatch's lease still stands.
    """

    inspected: int = 0
    redispatched: int = 0
    recollected: int = 0
    rollback_redispatched: int = 0
    rollback_batches: int = 0
    errors: int = 0
    batches: int = 0
    leased: int = 0


# ------------------------------------------------------------------------------ cursors


def _accepts_cursor(scan: Callable[..., Any]) -> bool:
    """Whether a store's ``scan`` takes ``cursor=`` (stores written before it did not)."""
    try:
        params = inspect.signature(scan).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == "cursor" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def scan_pages(
    scan: Callable[..., Sequence[T]],
    *,
    limit: int,
    cursor: str | None = None,
    **filters: Any,
) -> tuple[list[T], str | None]:
    """Read up to ``limit`` rows of a keyset-paged store scan, following ``next_cursor``.

    Pages are requested as ``scan(limit=<rows still wanted>, cursor=<cursor>, **filters)``
    until ``limit`` rows were read, the scan hands back ``next_cursor=None`` (the end of its
    index), or :data:`MAX_EMPTY_PAGES` empty pages in a row came back. A store whose ``scan``
    takes no ``cursor`` is read once, from the start (docs/workers.md, "Sweep cursors and
    dispatch leases").

    Args:
        scan: a store's bound ``scan`` method.
        limit: the most rows to read (>= 1).
        cursor: where to start (``None``: the beginning).
        **filters: further keyword arguments of ``scan`` (``statuses=``, ``status=``...).

    Returns:
        ``(rows, cursor to resume from)``; the cursor is ``None`` once the end was reached.

    Raises:
        ScanCursorError: the scan handed back a cursor it was already given in this walk.
        ValueError: ``cursor`` is malformed (from the store).
        StorageError: the backend failed.
    """
    if not _accepts_cursor(scan):
        return list(scan(limit=limit, **filters)), None
    rows: list[T] = []
    seen: set[str] = set() if cursor is None else {cursor}
    empty = 0
    while len(rows) < limit:
        page = scan(limit=limit - len(rows), cursor=cursor, **filters)
        rows.extend(page)
        following = getattr(page, "next_cursor", None)
        if following is None:
            return rows, None
        if not isinstance(following, str) or following in seen:
            raise ScanCursorError(
                f"{getattr(scan, '__qualname__', scan)!r} returned next_cursor={following!r} "
                f"after cursor={cursor!r}, which does not advance: the store's scan breaks "
                "keyset paging (docs/workers.md, \"Sweep cursors and dispatch leases\")"
            )
        seen.add(following)
        cursor = following
        empty = 0 if page else empty + 1
        if empty >= MAX_EMPTY_PAGES:
            break
    return rows, cursor


class _LocalCursors:
    """Process-memory cursors for a storage without ``sweep_cursors`` (one dict per storage)."""

    _by_storage: weakref.WeakKeyDictionary[Any, dict[str, str | None]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, storage: Storage) -> None:
        try:
            self._cursors = self._by_storage.setdefault(storage, {})
        except TypeError:  # not weakly referenceable: no memory at all
            self._cursors = {}

    def load(self, sweeper: str) -> str | None:
        return self._cursors.get(sweeper)

    def save(self, sweeper: str, cursor: str | None) -> None:
        self._cursors[sweeper] = cursor


def _cursors(storage: Storage) -> SweepCursorStore:
    """The storage's cursor store when it declares
    :class:`~reactor.ports.capabilities.KeepsSweepCursors` (and set it), else this process's
    memory (docs/protocol.md, "Sweep cursors")."""
    if declares(storage, KeepsSweepCursors):
        found = cast(KeepsSweepCursors, storage).sweep_cursors
        if found is not None:
            return found
    return _LocalCursors(storage)


class _Page:
    """One sweeper's page for this sweep: read from the saved cursor, saved back by ``commit``."""

    def __init__(
        self, storage: Storage, sweeper: str, scan: Callable[..., Sequence[Any]], limit: int,
        **filters: Any,
    ) -> None:
        self._store = _cursors(storage)
        self._sweeper = sweeper
        self._saved = self._store.load(sweeper)
        try:
            rows, self.next_cursor = scan_pages(scan, limit=limit, cursor=self._saved, **filters)
        except ValueError:
            if self._saved is None:
                raise
            log.warning("event=sweep_cursor_reset sweeper=%s cursor=%r (unreadable: starting "
                        "over)", sweeper, self._saved)
            rows, self.next_cursor = scan_pages(scan, limit=limit, cursor=None, **filters)
        self.rows: list[Any] = rows

    def commit(self) -> None:
        """Save where the next sweep starts (after this page's rows were handled)."""
        if self.next_cursor != self._saved:
            self._store.save(self._sweeper, self.next_cursor)


# ------------------------------------------------------------------------------ leases


class _Leases:
    """Takes dispatch marks for one sweep (the storage clock is read once per sweep)."""

    def __init__(self, storage: Storage, lease: DispatchLease | None) -> None:
        self._periods = storage.periods
        self._lease = lease
        self._now = storage.now() if lease is not None else 0.0

    def settling(self, written_at: float) -> bool:
        """Whether a unit whose record was last written at ``written_at`` is still taken as
        queued (:meth:`DispatchLease.settling`, judged at this sweep's storage time)."""
        return self._lease is not None and self._lease.settling(written_at, self._now)

    def claim(self, unit: str) -> bool:
        """Mark ``unit`` as re-dispatched now; ``False`` while an earlier mark stands.

        One read when the lease stands; else a read of the episode marker, the mark, and the
        episode marker the first time.
        """
        lease = self._lease
        if lease is None:
            return True
        periods = self._periods
        key = sweep_dispatch_key(unit)
        if periods.marker(key) is not None:
            return False
        episode = periods.marker(sweep_episode_key(unit))
        elapsed = 0.0 if episode is None else max(self._now - episode.marked_at, 0.0)
        if not periods.mark(key, ttl=lease.lease_for(elapsed)):
            return False  # another sweep marked it first
        if episode is None:
            periods.mark(sweep_episode_key(unit), ttl=lease.episode)
        return True


def sweep_runs(
    storage: Storage,
    router: Router,
    *,
    limit: int = 1000,
    lease: DispatchLease | None = DEFAULT_LEASE,
    waiting_on: Callable[[ContextRecord], str | None] | None = None,
    abandoned_step: Callable[[ContextRecord], str | None] | None = None,
) -> SweepCounts:
    """Re-enqueue ``running``/``rolling_back`` runs whose liveness lock is gone.

    Top-level runs and dispatched ``async_reactor`` children are inspected (docs/workers.md,
    "Decisions"); paused and terminal runs are left alone; a run whose ``async:<id>`` lock is
    held is alive; a run re-dispatched within its dispatch lease (unit ``run:<id>``) is left
    alone too, and so is a ``running`` run that ``waiting_on`` says waits for a unit still in
    flight (its lease is taken all the same, so it is looked at again one lease later). Reads
    one page from the ``runs`` cursor (docs/workers.md, "Sweep cursors and dispatch leases").

    Args:
        storage: the storage to scan.
        router: where re-dispatched ``run`` jobs go.
        limit: the maximum number of runs inspected.
        lease: the dispatch lease; ``None`` re-dispatches every lost run on every sweep.
        waiting_on: ``stored run -> the in-flight unit it waits for, or None``
            (:func:`reactor.engine.waiting.waiting_on`, bound to the storage); ``None``
            treats every run without a lock as lost.
        abandoned_step: ``stored run -> the step whose heartbeat it keeps, or None``
            (:func:`reactor.engine.attempt_leases.abandoned_heartbeat_step`): a ``running``
            run still settling (written within the lease's settle time) that names one lost
            its worker mid-step and is re-dispatched at once (one load per such run;
            docs/concepts.md, "Heartbeats"). ``None``: every settling run is left alone.

    Returns:
        The counts of this sweep.

    Raises:
        StorageError: reading the page or saving the cursor failed (a bad record never
            raises: it is logged and counted).
    """
    inspected = redispatched = errors = leased = waiting = settling = 0
    page = _Page(
        storage, "runs", storage.contexts.scan, limit,
        statuses=(RunStatus.RUNNING.value, RunStatus.ROLLING_BACK.value),
        include_dispatched_children=True,
    )
    leases = _Leases(storage, lease)
    for row in page.rows:
        inspected += 1
        try:
            if storage.locks.held(run_liveness_key(row.context_id)):
                continue
            record = None
            if leases.settling(row.updated_at):
                step = None
                if abandoned_step is not None and row.status == RunStatus.RUNNING.value:
                    record = storage.contexts.load(row.context_id)
                    step = None if record is None else abandoned_step(record)
                if step is None:
                    settling += 1
                    continue
                log.info("event=sweep_run_abandoned_mid_step context_id=%s step=%s",
                         row.context_id, step)
            if not leases.claim(run_unit(row.context_id)):
                leased += 1
                continue
            if waiting_on is not None and row.status == RunStatus.RUNNING.value:
                if record is None:
                    record = storage.contexts.load(row.context_id)
                unit = None if record is None else waiting_on(record)
                if unit is not None:
                    waiting += 1
                    log.debug("event=sweep_run_waiting context_id=%s unit=%s",
                              row.context_id, unit)
                    continue
            router.enqueue(job(RunPayload(context_id=row.context_id, reactor=row.reactor)))
            redispatched += 1
        except Exception:
            errors += 1
            log.exception("event=sweep_error sweeper=runs context_id=%s", row.context_id)
    page.commit()
    return SweepCounts(
        inspected, redispatched, errors, leased, page.next_cursor is None, waiting=waiting,
        settling=settling,
    )


def sweep_sleeping_runs(
    storage: Storage,
    wake: Callable[[str], float | None],
    *,
    limit: int = 1000,
) -> SweepCounts:
    """Wake ``paused`` runs whose sleep is due and whose ``sleep_wake`` timer job was lost
    (docs/schedules.md, "Durable sleep").

    Reads one page of ``paused`` runs from the ``sleeps`` cursor (docs/workers.md, "Sweep
    cursors and dispatch leases"); a run whose liveness lock is held is left alone; every
    other one is handed to ``wake``, which leaves a run that does not sleep, or whose wake
    time is ahead, as it is. Waking is idempotent (the first waker stores the run
    ``running``; the others find it awake), so no dispatch lease is taken.

    Args:
        storage: the storage to scan.
        wake: ``run id -> None or seconds to wait`` (:func:`reactor.engine.sleeps.wake_due`,
            bound to an environment).
        limit: the maximum number of runs inspected.

    Returns:
        The counts of this sweep (``redispatched``: runs inspected that ``wake`` woke or
        found not sleeping; ``waiting``: sleeping runs not due yet or locked).

    Raises:
        StorageError: reading the page or saving the cursor failed (a bad record never
            raises: it is logged and counted).
    """
    inspected = woken = errors = waiting = 0
    page = _Page(storage, "sleeps", storage.contexts.scan, limit,
                 statuses=(RunStatus.PAUSED.value,), include_dispatched_children=True)
    for row in page.rows:
        inspected += 1
        try:
            if storage.locks.held(run_liveness_key(row.context_id)):
                continue
            if wake(row.context_id) is None:
                woken += 1
            else:
                waiting += 1
        except Exception:
            errors += 1
            log.exception("event=sweep_error sweeper=sleeps context_id=%s", row.context_id)
    page.commit()
    return SweepCounts(inspected, woken, errors, 0, page.next_cursor is None, waiting=waiting)


def sweep_steps(
    storage: Storage,
    router: Router,
    *,
    limit: int = 1000,
    lease: DispatchLease | None = DEFAULT_LEASE,
) -> SweepCounts:
    """Re-dispatch ``async_step`` units that are dispatched, not parked, and have no live lock.

    A record whose ``parked_until`` is in the future is parked, not lost (docs/workers.md,
    "Async steps"); a swept park carries its ``contention_attempts`` forward so the cap still
    holds; a unit re-dispatched within its dispatch lease (unit ``step:<ctx>:<step>``) is left
    alone. Reads one page from the ``steps`` cursor (docs/workers.md, "Sweep cursors and
    dispatch leases").

    Args:
        storage: the storage to scan.
        router: where re-dispatched ``step`` jobs go.
        limit: the maximum number of records inspected.
        lease: the dispatch lease; ``None`` re-dispatches every lost unit on every sweep.

    Returns:
        The counts of this sweep.

    Raises:
        StorageError: reading the page or saving the cursor failed.
    """
    inspected = redispatched = errors = leased = settling = 0
    now = storage.now()
    page = _Page(storage, "steps", storage.step_results.scan, limit, status="dispatched")
    leases = _Leases(storage, lease)
    for record in page.rows:
        inspected += 1
        try:
            if record.parked_until is not None and record.parked_until > now:
                continue
            if storage.locks.held(step_liveness_key(record.context_id, record.step_name)):
                continue
            if leases.settling(record.updated_at):
                settling += 1
                continue
            if not leases.claim(step_unit(record.context_id, record.step_name)):
                leased += 1
                continue
            payload = StepPayload(
                root_context_id=record.root_context_id,
                reactor=record.reactor,
                step_context_id=record.context_id,
                step_name=record.step_name,
                contention_attempts=record.contention_attempts,
            )
            router.enqueue(job(payload))
            redispatched += 1
        except Exception:
            errors += 1
            log.exception(
                "event=sweep_error sweeper=steps context_id=%s step=%s",
                record.context_id,
                record.step_name,
            )
    page.commit()
    return SweepCounts(
        inspected, redispatched, errors, leased, page.next_cursor is None, settling=settling
    )


def _decode(record: ContextRecord) -> dict[str, Any]:
    """Decode a record's document; the error names the run it belongs to."""
    try:
        return checkpoints.stored_document(record)
    except DeserializationError as exc:
        raise type(exc)(f"stored run {record.context_id!r} is unreadable: {exc}") from exc


def _collected_by_parent(record: ContextRecord, step_name: str) -> bool:
    """Whether the parent context already recorded the map step's result."""
    document = _decode(record)
    results = document.get("intermediate_results")
    return isinstance(results, dict) and step_name in results


def _parent_alive(storage: Storage, meta: MapMetadata) -> bool:
    outer_map, outer_index = meta.outer_map_id, meta.outer_index
    if meta.parent_is_map_element and outer_map is not None and outer_index is not None:
        return storage.locks.held(map_element_key(outer_map, outer_index))
    return storage.locks.held(run_liveness_key(meta.owner_context_id or meta.parent_context_id))


def _should_recollect(
    storage: Storage,
    meta: MapMetadata,
    collected: Callable[[ContextRecord, str], bool],
) -> bool:
    if storage.locks.held(map_collect_key(meta.map_id)) or _parent_alive(storage, meta):
        return False
    owner = storage.contexts.load(meta.owner_context_id or meta.parent_context_id)
    if owner is not None and RunStatus.parse(owner.status) in _COLLECTED_OWNER_STATUSES:
        return False
    parent = storage.contexts.load(meta.parent_context_id)
    return not (parent is not None and collected(parent, meta.step_name))


def _element_index(storage: Storage, element_context_id: str | None) -> int | None:
    if element_context_id is None:
        return None
    record = storage.contexts.load(element_context_id)
    if record is None:
        return None
    membership = map_membership_of(_decode(record))
    return None if membership is None else membership.index


def sweep_maps(
    storage: Storage,
    router: Router,
    *,
    limit: int = 1000,
    collected: Callable[[ContextRecord, str], bool] = _collected_by_parent,
    dispatch_batch: Callable[[MapMetadata], object] | None = None,
    lease: DispatchLease | None = DEFAULT_LEASE,
) -> MapSweepCounts:
    """Recover lost map element jobs, collectors, rollback jobs and rollback batch triggers.

    docs/fan_out.md, "Recovery":

    * forward pass: re-dispatch each missing index whose element lock is not held — below the
      dispatch offset when the map records one (indexes not yet reached by the batch chain are
      not lost, they are waiting for their throw); when nothing below the offset is missing but
      indexes remain unclaimed, the batch trigger was lost: ``dispatch_batch`` claims the next
      throw; when nothing is missing at all, re-trigger the collector only if no collector and
      no parent is alive and the parent has not collected;
    * rollback pass: re-dispatch claimed positions without an outcome whose element lock is not
      held; when every claimed position is settled but positions remain unclaimed, claim the
      next batch (its trigger was lost).

    Each pass reads one page from its cursor (``maps``, ``map_rollbacks``); settled maps and
    finished rollbacks are no longer listed. Every re-dispatch first takes its dispatch lease
    (units ``map_element:<map>:<index>``, ``map_collect:<map>``, ``map_batch:<map>:<offset>``,
    ``map_rollback:<map>:<position>``, ``map_rollback_batch:<map>:<offset>``); a unit whose
    lease stands is left alone (docs/workers.md, "Sweep cursors and dispatch leases").

    Args:
        storage: the storage to scan.
        router: where jobs go.
        limit: the maximum number of maps (and of rollbacks) inspected.
        collected: decides whether a parent context already recorded the map step.
        dispatch_batch: claims and dispatches a fan-out map's next throw
            (:func:`reactor.engine.maps.dispatcher.dispatch_batch` bound to a runtime); ``None``
            leaves lost forward batch triggers alone.
        lease: the dispatch lease; ``None`` re-dispatches every lost unit on every sweep.

    Returns:
        The counts of this sweep.

    Raises:
        StorageError: reading a page or saving a cursor failed.
    """
    inspected = redispatched = recollected = rb_redispatched = rb_batches = errors = 0
    batches = leased = 0
    leases = _Leases(storage, lease)
    maps = _Page(storage, "maps", storage.maps.scan, limit)
    for meta in maps.rows:
        inspected += 1
        try:
            missing = storage.maps.missing_indices(meta.map_id, meta.count)
            offset = storage.maps.offset(meta.map_id)
            reached = meta.count if offset is None else min(offset, meta.count)
            lost = [index for index in missing if index < reached]
            for index in lost:
                if storage.locks.held(map_element_key(meta.map_id, index)):
                    continue
                if not leases.claim(f"map_element:{meta.map_id}:{index}"):
                    leased += 1
                    continue
                router.enqueue(job(MapElementPayload(map_id=meta.map_id, index=index)))
                redispatched += 1
            if missing and not lost and dispatch_batch is not None:
                # every reached index settled: the throw's trigger died
                if leases.claim(f"map_batch:{meta.map_id}:{offset}"):
                    dispatch_batch(meta)
                    batches += 1
                else:
                    leased += 1
            if not missing and _should_recollect(storage, meta, collected):
                if leases.claim(f"map_collect:{meta.map_id}"):
                    router.enqueue(job(MapCollectPayload(map_id=meta.map_id)))
                    recollected += 1
                else:
                    leased += 1
        except Exception:
            errors += 1
            log.exception("event=sweep_error sweeper=maps map_id=%s", meta.map_id)
    maps.commit()
    rollbacks = _Page(storage, "map_rollbacks", storage.map_rollbacks.scan, limit)
    for rollback in rollbacks.rows:
        inspected += 1
        try:
            claimed = min(storage.map_rollbacks.offset(rollback.map_id), rollback.total)
            settled = set(storage.map_rollbacks.outcome_positions(rollback.map_id))
            missing_positions = [p for p in range(claimed) if p not in settled]
            for position in missing_positions:
                ids = storage.maps.element_ids_from_tail(
                    rollback.map_id, position=position, count=1, total=rollback.total
                )
                element_index = _element_index(storage, ids[0] if ids else None)
                if element_index is not None and storage.locks.held(
                    map_element_key(rollback.map_id, element_index)
                ):
                    continue
                if not leases.claim(f"map_rollback:{rollback.map_id}:{position}"):
                    leased += 1
                    continue
                payload = MapElementRollbackPayload(map_id=rollback.map_id, position=position)
                router.enqueue(job(payload))
                rb_redispatched += 1
            if not missing_positions and claimed < rollback.total:
                if not leases.claim(f"map_rollback_batch:{rollback.map_id}:{claimed}"):
                    leased += 1
                elif dispatch_rollback_batch(storage, router, rollback):
                    rb_batches += 1
        except Exception:
            errors += 1
            log.exception("event=sweep_error sweeper=map_rollbacks map_id=%s", rollback.map_id)
    rollbacks.commit()
    return MapSweepCounts(
        inspected, redispatched, recollected, rb_redispatched, rb_batches, errors, batches,
        leased,
    )

"""The sweepers: recover units of work lost with a dead worker (storage-protocol.md §3).

Each sweeper works only through :class:`reactor.ports.Storage` and :class:`reactor.ports.Router`:
it scans records that say "in flight", checks the unit's liveness lock
(:mod:`reactor.model.keys`), and re-enqueues identity-only jobs for units whose lock is gone.
Re-dispatching a live unit is harmless (the duplicate meets the live lock and drops itself),
so sweeps are idempotent. One bad record never aborts a sweep: it is logged and counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reactor.jobs.payloads import (
    MapCollectPayload,
    MapElementPayload,
    MapElementRollbackPayload,
    RunPayload,
    StepPayload,
    job,
)
from reactor.model import codec
from reactor.model.errors import DeserializationError
from reactor.model.keys import (
    map_collect_key,
    map_element_key,
    run_liveness_key,
    step_liveness_key,
)
from reactor.model.status import RunStatus
from reactor.ports.records import ContextRecord, MapMetadata, MapRollbackMetadata
from reactor.ports.router import Router
from reactor.ports.storage import Storage

__all__ = [
    "MapSweepCounts",
    "SweepCounts",
    "dispatch_rollback_batch",
    "sweep_maps",
    "sweep_runs",
    "sweep_steps",
]

log = logging.getLogger("reactor.sweeper")

#: Owner statuses after which a map must not be re-collected (storage-protocol.md §3.3).
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


@dataclass(frozen=True, slots=True)
class SweepCounts:
    """What one sweep did.

    Attributes:
        inspected: records looked at.
        redispatched: jobs re-enqueued.
        errors: records skipped because inspecting them raised.
    """

    inspected: int = 0
    redispatched: int = 0
    errors: int = 0


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
    """

    inspected: int = 0
    redispatched: int = 0
    recollected: int = 0
    rollback_redispatched: int = 0
    rollback_batches: int = 0
    errors: int = 0
    batches: int = 0


def sweep_runs(storage: Storage, router: Router, *, limit: int = 1000) -> SweepCounts:
    """Re-enqueue ``running``/``rolling_back`` runs whose liveness lock is gone.

    Mirrors ruby_reactor's ``Sweeper`` (storage-protocol.md §3.1): top-level runs and dispatched
    ``async_reactor`` children are inspected; paused and terminal runs are left alone; a run
    whose ``async:<id>`` lock is held is alive.

    Args:
        storage: the storage to scan.
        router: where re-dispatched ``run`` jobs go.
        limit: the maximum number of runs inspected.

    Returns:
        The counts of this sweep.
    """
    inspected = redispatched = errors = 0
    rows = storage.contexts.scan(
        statuses=(RunStatus.RUNNING.value, RunStatus.ROLLING_BACK.value),
        limit=limit,
        include_dispatched_children=True,
    )
    for row in rows:
        inspected += 1
        try:
            if storage.locks.held(run_liveness_key(row.context_id)):
                continue
            router.enqueue(job(RunPayload(context_id=row.context_id, reactor=row.reactor)))
            redispatched += 1
        except Exception:
            errors += 1
            log.exception("event=sweep_error sweeper=runs context_id=%s", row.context_id)
    return SweepCounts(inspected, redispatched, errors)


def sweep_steps(storage: Storage, router: Router, *, limit: int = 1000) -> SweepCounts:
    """Re-dispatch ``async_step`` units that are dispatched, not parked, and have no live lock.

    Mirrors the StepSweeper (seeds 000/003, ``step_sweeper.rb``): a record whose
    ``parked_until`` is in the future is parked, not lost; a swept park carries its
    ``contention_attempts`` forward so the cap still holds.

    Returns:
        The counts of this sweep.
    """
    inspected = redispatched = errors = 0
    now = storage.now()
    for record in storage.step_results.scan(status="dispatched", limit=limit):
        inspected += 1
        try:
            if record.parked_until is not None and record.parked_until > now:
                continue
            if storage.locks.held(step_liveness_key(record.context_id, record.step_name)):
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
    return SweepCounts(inspected, redispatched, errors)


def _decode(record: ContextRecord) -> dict[str, Any]:
    """Decode a record's document; the error names the run it belongs to."""
    try:
        return codec.decode_document(record.document)
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


def dispatch_rollback_batch(
    storage: Storage, router: Router, meta: MapRollbackMetadata
) -> range:
    """Claim the next batch of rollback positions and enqueue one rollback job per position.

    Mirrors ``Map::Dispatcher.dispatch_rollback_batch`` (seed 004).

    Returns:
        The claimed positions (empty when every position was already claimed).
    """
    positions = storage.map_rollbacks.claim_positions(meta.map_id, meta.batch_size)
    for position in positions:
        router.enqueue(job(MapElementRollbackPayload(map_id=meta.map_id, position=position)))
    return positions


def _element_index(storage: Storage, element_context_id: str | None) -> int | None:
    if element_context_id is None:
        return None
    record = storage.contexts.load(element_context_id)
    if record is None:
        return None
    document = _decode(record)
    metadata = document.get("map_metadata")
    index = metadata.get("index") if isinstance(metadata, dict) else None
    return index if isinstance(index, int) else None


def sweep_maps(
    storage: Storage,
    router: Router,
    *,
    limit: int = 1000,
    collected: Callable[[ContextRecord, str], bool] = _collected_by_parent,
    dispatch_batch: Callable[[MapMetadata], object] | None = None,
) -> MapSweepCounts:
    """Recover lost map element jobs, collectors, rollback jobs and rollback batch triggers.

    Mirrors ``Map::Sweeper`` (seed 004, ``map/sweeper.rb``; storage-protocol.md §3.3):

    * forward pass: re-dispatch each missing index whose element lock is not held — below the
      dispatch offset when the map records one (indexes not yet reached by the batch chain are
      not lost, they are waiting for their throw); when nothing below the offset is missing but
      indexes remain unclaimed, the batch trigger was lost: ``dispatch_batch`` claims the next
      throw; when nothing is missing at all, re-trigger the collector only if no collector and
      no parent is alive and the parent has not collected;
    * rollback pass: re-dispatch claimed positions without an outcome whose element lock is not
      held; when every claimed position is settled but positions remain unclaimed, claim the
      next batch (its trigger was lost).

    Args:
        storage: the storage to scan.
        router: where jobs go.
        limit: the maximum number of maps (and of rollbacks) inspected.
        collected: decides whether a parent context already recorded the map step.
        dispatch_batch: claims and dispatches a fan-out map's next throw
            (:func:`reactor.engine.fan_out.dispatch_batch` bound to a runtime); ``None``
            leaves lost forward batch triggers alone.

    Returns:
        The counts of this sweep.
    """
    inspected = redispatched = recollected = rb_redispatched = rb_batches = errors = 0
    batches = 0
    for meta in storage.maps.scan(limit=limit):
        inspected += 1
        try:
            missing = storage.maps.missing_indices(meta.map_id, meta.count)
            offset = storage.maps.offset(meta.map_id)
            reached = meta.count if offset is None else min(offset, meta.count)
            lost = [index for index in missing if index < reached]
            for index in lost:
                if storage.locks.held(map_element_key(meta.map_id, index)):
                    continue
                router.enqueue(job(MapElementPayload(map_id=meta.map_id, index=index)))
                redispatched += 1
            if missing and not lost and dispatch_batch is not None:
                dispatch_batch(meta)  # every reached index settled: the throw's trigger died
                batches += 1
            if not missing and _should_recollect(storage, meta, collected):
                router.enqueue(job(MapCollectPayload(map_id=meta.map_id)))
                recollected += 1
        except Exception:
            errors += 1
            log.exception("event=sweep_error sweeper=maps map_id=%s", meta.map_id)
    for rollback in storage.map_rollbacks.scan(limit=limit):
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
                payload = MapElementRollbackPayload(map_id=rollback.map_id, position=position)
                router.enqueue(job(payload))
                rb_redispatched += 1
            if (
                not missing_positions
                and claimed < rollback.total
                and dispatch_rollback_batch(storage, router, rollback)
            ):
                rb_batches += 1
        except Exception:
            errors += 1
            log.exception("event=sweep_error sweeper=map_rollbacks map_id=%s", rollback.map_id)
    return MapSweepCounts(
        inspected, redispatched, recollected, rb_redispatched, rb_batches, errors, batches
    )

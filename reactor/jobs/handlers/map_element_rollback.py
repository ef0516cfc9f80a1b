"""The ``map_element_rollback`` job: roll back the element at one tail position of a fan-out
map's element index (docs/fan_out.md, "Rollback"; docs/architecture.md, "Job kinds").

1. No rollback metadata, or the position already has an outcome: nothing to do.
2. The element context id is read at the position, counted from the tail of the first
   ``total`` entries of the element index (later appends never shift it).
3. :func:`reactor.engine.maps.rollback.roll_back_element` takes the element's lock, **then**
   reads the element's context (in one request where the store can) and checks the
   position's outcome again: a duplicate of this job (the map sweeper re-enqueues a position
   whose job is merely queued) that ran while this one waited settled it, and its saves are
   what this job reads (docs/protocol.md, "Rollback jobs: lock before read"). Then it replays
   the undo stack, saving after each entry. A held lock re-queues this job (``attempt + 1``)
   after a park delay, and at least until the holder's lease lapses: a holder whose worker
   died frees the lock by then, so each attempt that finds it held again found a live holder
   (one that renewed its lease). After ``lock_snooze_max_attempts`` such attempts the element
   is reported ``element_in_flight``. An undo/compensate inside the element whose own lock or
   semaphore is taken **parks** (docs/coordination.md, "Rollback"): the element's context is
   saved with its rollback in progress and this job is re-queued with the same ``attempt``
   (uncapped: an undo is never skipped for contention); the redelivery resumes at that entry.
4. The outcome is stored first-wins; the position that ends a batch claims the next batch; and
   when every position is settled and the owner has handed off, the signal claim's winner
   enqueues the owner's ``run`` job.
"""

from __future__ import annotations

from reactor import registry
from reactor.dsl.definition import ReactorDefinition
from reactor.engine.liveness import lease_remaining
from reactor.engine.maps.rollback import (
    Contended,
    dispatch_rollback_batch,
    in_flight,
    roll_back_element,
    signal_owner_if_settled,
)
from reactor.engine.parks import Park, park_delay
from reactor.jobs.job_context import JobContext
from reactor.model.keys import map_element_key
from reactor.model.text import escaping_logger
from reactor.ports.payloads import MapElementRollbackPayload

__all__ = ["handle_map_element_rollback"]

log = escaping_logger("reactor.map")

#: Seconds past the holder's lease a contended job waits, so the lapse has surely happened.
LEASE_MARGIN = 0.1


def handle_map_element_rollback(jc: JobContext, payload: MapElementRollbackPayload) -> None:
    """Run one ``map_element_rollback`` job (see the module docstring).

    Raises:
        UnknownReactorError: the element reactor is not registered (poison).
        StorageError, RouterError: a backend failed (the worker retries the job).
    """
    env = jc.env()
    storage = env.storage
    rollbacks = storage.map_rollbacks
    meta = rollbacks.metadata(payload.map_id)
    if meta is None:
        log.warning("event=map_rollback_missing map_id=%s position=%d",
                    payload.map_id, payload.position)
        return
    if rollbacks.outcome(meta.map_id, payload.position) is not None:
        return
    definition: ReactorDefinition = registry.get(meta.element_reactor).definition
    definition.register_codec_types()
    ids = storage.maps.element_ids_from_tail(
        meta.map_id, position=payload.position, count=1, total=meta.total
    )
    try:
        outcome = roll_back_element(
            env, meta.map_id, ids[0] if ids else None, meta.step_name, definition,
            use_lock=not jc.inline, position=payload.position,
        )
    except Park as park:  # an undo inside the element waits on its lock or slot
        log.info("event=map_rollback_parked map_id=%s position=%d reason=%s key=%s delay=%.2f",
                 meta.map_id, payload.position, park.reason, park.key, park.delay)
        jc.requeue(payload, park.delay)
        return
    if isinstance(outcome, Contended):
        limit = env.settings.lock_snooze_max_attempts
        if limit is None or payload.attempt < limit:
            # at least until the holder's lease lapses: a dead holder (its worker killed
            # mid-element) never uses up the attempts, which count live holders only
            remaining = lease_remaining(env, map_element_key(meta.map_id, outcome.index))
            delay = max(park_delay(env.settings), (remaining or 0.0) + LEASE_MARGIN)
            log.info("event=map_rollback_contended map_id=%s position=%d index=%d attempt=%d "
                     "delay=%.2f", meta.map_id, payload.position, outcome.index,
                     payload.attempt, delay)
            jc.requeue(payload.model_copy(update={"attempt": payload.attempt + 1}), delay)
            return
        outcome = in_flight(meta.step_name, outcome.index)
    if not rollbacks.put_outcome(meta.map_id, payload.position, outcome):
        return
    log.info("event=map_rollback_element map_id=%s position=%d index=%s outcome=%s",
             meta.map_id, payload.position, outcome.index, outcome.outcome)
    if meta.batch_size > 0 and (payload.position + 1) % meta.batch_size == 0:
        dispatch_rollback_batch(storage, jc.runtime.router, meta)
    signal_owner_if_settled(env, meta.map_id)

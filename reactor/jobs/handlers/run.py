"""The ``run`` job: start or continue a stored run in a worker (docs/architecture.md, "Job kinds").

1. Resolve the reactor by **registered name** (an unknown name is a poison job).
2. Take the run's liveness lock ``async:<id>`` with a fresh owner, **before reading** the
   context (in one request with the read where the store can: docs/protocol.md, "Optional
   fast paths"; polling up to ``JobContext.liveness_wait``); a live holder means another
   execution owns the run: re-enqueue with a short delay (uncapped, not counted as a snooze).
3. Load the context; an unreadable one is quarantined (stored ``failed`` with its original
   text and the reason, :mod:`reactor.engine.quarantine`) and the job dead-lettered once;
   nothing stored, a terminal run or a run that is not ``running`` (or
   ``rolling_back``) is a no-op (a stale or duplicate delivery).
4. A run this process's definition cannot continue is handed back to a worker announcing
   the run's definition when one is live (nothing saved), else continued as below, which
   holds it ``needs_version`` (docs/deploys.md, "Routing by version").
5. Continue it (:func:`reactor.engine.background.continue_run`): steps from ``current_step``
   with the persisted undo stack, or the rollback a crash cut off. A ``rolling_back`` run
   (a fan-out map's distributed rollback was handed to element jobs) is resumed the same way
   (``resume_rollback``): it re-enters the map's rollback, aggregates the settled outcomes and
   finishes the rest (:mod:`reactor.engine.maps.rollback`). A fan-out map that dispatched its
   elements (:class:`~reactor.engine.maps.fan_out.MapDispatched`) or a map rollback still in flight
   (:class:`~reactor.engine.maps.rollback.RollbackHandedOff`, saved ``rolling_back`` here) ends
   the job: the collector or the last rollback job resumes the run.
6. Save before releasing the lock (the final save releases it, in the same request where the
   store can), then publish the completion channel (docs/architecture.md, "Execution
   invariants").

Retries with backoff and parks give the thread back: the context is saved, the liveness lock is
kept (not extended) for the delay as a "parked until" stamp so the sweeper leaves the run alone,
and the job is re-enqueued with the delay. Parks count toward ``lock_snooze_max_attempts``
(capped reasons only, carried as ``snooze_count`` in the payload); at the cap a run that was never
admitted is stored ``failed`` without rollback (nothing ran), while an admitted run keeps waiting
and logs once (docs/coordination.md, "Contention").
"""

from __future__ import annotations

from reactor import registry
from reactor.engine import background, compatibility, liveness
from reactor.engine.checkpoint import decode_context, load_context
from reactor.engine.dispatch import publish_completion
from reactor.engine.dispatch_leases import mark_enqueued, run_unit
from reactor.engine.env import Env
from reactor.engine.maps import fan_out
from reactor.engine.maps import rollback as map_rollback
from reactor.engine.parks import Park, snooze_limit_failure
from reactor.engine.quarantine import quarantine
from reactor.engine.run_control import deadline
from reactor.errors import DeserializationError, LockLost
from reactor.jobs import version_routing
from reactor.jobs.job_context import JobContext
from reactor.model.context import Context
from reactor.model.keys import (
    CANCEL_CLAIM_PATH,
    FIRST_SUSPEND_CLAIM_PATH,
    run_completion_channel,
    run_liveness_key,
)
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from reactor.model.text import escaping_logger
from reactor.ports.payloads import RunPayload

__all__ = ["contention_delay", "handle_run", "log_run_outcome"]

log = escaping_logger("reactor.worker")

#: Shortest re-enqueue delay after liveness-lock contention, in seconds.
MIN_CONTENTION_DELAY = 0.1


def contention_delay(env: Env, context_id: str) -> float:
    """How long a job waits before retrying a run whose liveness lock another owner holds.

    The holder's remaining TTL (a parked run's stamp lapses then), at least 0.1 s and at most
    ``lock_snooze_base_delay`` (a live execution: check again later).
    """
    ceiling = max(env.settings.lock_snooze_base_delay, MIN_CONTENTION_DELAY)
    remaining = liveness.lease_remaining(env, run_liveness_key(context_id))
    if remaining is None:
        return ceiling
    return min(max(remaining, MIN_CONTENTION_DELAY), ceiling)


def handle_run(jc: JobContext, payload: RunPayload) -> None:
    """Run one ``run`` job (see the module docstring).

    Raises:
        UnknownReactorError: the payload names no registered reactor (poison).
        DeserializationError: the stored context is malformed (it was first stored ``failed``
            with a quarantine document, :mod:`reactor.engine.quarantine`, so no sweep
            re-dispatches it) or belongs to another reactor.
        StorageError, RouterError: a backend failed (the worker retries the job).
    """
    definition = registry.get(payload.reactor).definition
    definition.register_codec_types()
    # In a worker, contention and async waits park instead of blocking (docs/architecture.md,
    # "Execution invariants"); inline, the job runs nested in its caller, which waits.
    env = jc.env()
    wait = 0.0 if jc.inline else jc.liveness_wait
    reload = False
    try:  # the lock and the run in one request where the store can
        hold, record = liveness.take_loading(
            env, payload.context_id, wait=wait,
            claim_paths=(CANCEL_CLAIM_PATH, FIRST_SUSPEND_CLAIM_PATH),
        )
    except DeserializationError:  # unreadable: take the lock alone; the load below quarantines
        hold, record, reload = liveness.take(env, payload.context_id, wait=wait), None, True
    if hold is None:
        delay = contention_delay(env, payload.context_id)
        log.info(
            "event=liveness_contention context_id=%s delay=%.2f", payload.context_id, delay
        )
        jc.requeue(payload, delay)
        return
    if env.storage.capabilities.signals:  # the final save announces the completion
        hold.announce = run_completion_channel(payload.context_id)
    finished: Context | None = None
    try:
        try:
            if reload:
                ctx = load_context(env, payload.context_id)
            else:
                ctx = None if record is None else decode_context(env, record)
        except DeserializationError as exc:  # unreadable: store it failed, dead-letter once
            finished = quarantine(env, payload.context_id, exc)
            if finished is not None:
                raise
            ctx = load_context(env, payload.context_id)  # readable after all, or raises
        if ctx is None:
            log.warning("event=run_missing context_id=%s", payload.context_id)
            return
        if ctx.reactor != payload.reactor:
            raise DeserializationError(
                f"run {payload.context_id!r} belongs to reactor {ctx.reactor!r}, "
                f"not {payload.reactor!r}"
            )
        if ctx.status is RunStatus.ROLLING_BACK:  # resume_rollback: a map rollback settled
            ctx.status = RunStatus.RUNNING  # (reactor.engine.maps.rollback)
        if ctx.status is not RunStatus.RUNNING:  # finished, paused...: stale or duplicate
            log.info(
                "event=run_skipped context_id=%s status=%s", ctx.context_id, ctx.status.value
            )
            return
        # docs/deploys.md, "Routing by version": another worker may continue it
        found = compatibility.judge(definition, ctx, forward=ctx.rollback is None)
        if found is not None and version_routing.hand_back(
            jc, payload, ctx.reactor, ctx.engine_state.definition, found
        ):
            return  # nothing saved: the lock is released below
        try:
            background.continue_run(definition, ctx, env, hold)
        except background.RetryLater as retry:
            log.info(
                "event=retry_queued context_id=%s step=%s delay=%.2f",
                ctx.context_id, retry.step, retry.delay,
            )
            _pause(jc, hold, payload, deadline.capped_delay(ctx, retry.delay, env.now()))
            return
        except Park as park:
            finished = _park(jc, env, hold, ctx, payload, park)
            return
        except fan_out.MapDispatched as dispatched:  # saved before its elements were enqueued
            log.info("event=run_handed_to_map context_id=%s step=%s map_id=%s",
                     ctx.context_id, dispatched.step, dispatched.map_id)
            return
        except compatibility.NeedsVersion:  # saved needs_version (docs/deploys.md)
            return
        except map_rollback.RollbackHandedOff as handed:
            map_rollback.hand_off(env, liveness.FencedCheckpointer(env, ctx, hold), handed)
            return
        except LockLost as exc:
            log.warning(
                "event=liveness_lost context_id=%s error=%s (another execution owns the run)",
                payload.context_id, exc,
            )
            hold.lock = None  # not ours any more: never release someone else's lock
            return
        finished = ctx
    finally:
        hold.release()  # after the final save (no-op when paused: the hold was handed over)
        if finished is not None and finished.status in TERMINAL_STATUSES:
            log_run_outcome(finished)
            if not hold.announced:  # the final save did not publish it
                publish_completion(env.storage, finished)
        elif finished is not None and finished.status is RunStatus.PAUSED:
            log_run_outcome(finished)  # an outcome too: it waits for Reactor.resume


def log_run_outcome(ctx: Context) -> None:
    """Log one INFO line for a run this job left terminal or paused (docs/workers.md,
    "Running workers"):
    ``event=run_finished run_id=... reactor=... status=... duration=...`` with the duration in
    seconds from the run's creation to its final save (the store's clock).

    Args:
        ctx: the run, after its terminal (or paused) save.
    """
    duration = max(ctx.updated_at - ctx.created_at, 0.0) if ctx.created_at else 0.0
    log.info(
        "event=run_finished run_id=%s reactor=%s status=%s duration=%.3f",
        ctx.context_id, ctx.reactor, ctx.status.value, duration,
    )


def _pause(jc: JobContext, hold: liveness.Liveness, payload: RunPayload, delay: float) -> None:
    """Re-enqueue after ``delay``; keep the liveness lock as a stamp until then, and the run's
    dispatch mark for the delay and one lease more, while the job waits in the queue
    (docs/workers.md, "Sweep cursors and dispatch leases")."""
    if jc.inline:
        hold.release()
    else:
        hold.park(delay)
        mark_enqueued(jc.runtime, run_unit(payload.context_id), delay=delay)
    jc.requeue(payload, delay)


def _park(
    jc: JobContext,
    env: Env,
    hold: liveness.Liveness,
    ctx: Context,
    payload: RunPayload,
    park: Park,
) -> Context | None:
    """Handle a park: re-enqueue, or fail a never-admitted run at the cap.

    Returns:
        The context when the run was finished here (failed at the cap), else ``None``.
    """
    limit = env.settings.lock_snooze_max_attempts
    count = payload.snooze_count
    admitted = background.is_admitted(ctx)
    if snooze_limit_failure(park, count, env.settings, ctx, admitted=admitted) is not None:
        liveness.FencedCheckpointer(env, ctx, hold).save()
        log.warning(
            "event=snooze_limit context_id=%s reason=%s key=%s attempts=%d",
            ctx.context_id, park.reason, park.key, count,
        )
        return ctx
    if park.capped and count == limit:  # an admitted run at the cap keeps waiting
        log.warning(
            "event=snooze_limit_admitted context_id=%s reason=%s key=%s attempts=%d "
            "(admitted run keeps waiting)",
            ctx.context_id, park.reason, park.key, count,
        )
    log.info(
        "event=run_parked context_id=%s reason=%s key=%s delay=%.2f snooze_count=%d",
        ctx.context_id, park.reason, park.key, park.delay, count,
    )
    next_payload = (
        payload.model_copy(update={"snooze_count": count + 1}) if park.capped else payload
    )
    # a run with a deadline comes back at it and stops itself (docs/concepts.md, "Run
    # deadlines")
    _pause(jc, hold, next_payload, deadline.capped_delay(ctx, park.delay, env.now()))
    return None

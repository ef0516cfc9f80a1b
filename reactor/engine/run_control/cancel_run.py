"""``Reactor.cancel(run_id)``: stop a run that has not finished, roll it back and store it
``cancelled`` (docs/run-control.md, "Cancel").

1. The arguments are checked and the run is read (sealed). A map element is refused (cancel
   its top-level run; an ``async_reactor`` child is a run of its own and can be cancelled), a
   finished run (``completed``, ``halted``, ``failed``, ``aborted``)
   raises :class:`~reactor.errors.RunFinishedError`, a run already ``cancelled`` by a cancel
   gives its stored outcome again (idempotent: nothing runs twice).
2. The request is claimed (:func:`reactor.engine.run_control.cancel.claim`, first writer
   wins: a second cancel keeps the first one's ``reason`` and ``rollback``).
3. The canceller tries the run's liveness lock ``async:<id>`` (once; for a paused run, whose
   lock is only ever held briefly, again for up to ``context_lock_ttl`` seconds while it stays
   paused):

   * **held**: an execution owns the run (a caller, a worker, a parked or retry-delayed job
     keeping its lock): it notices the request at its next step boundary, or when its job is
     delivered again, and carries the cancel out. The call returns a
     :class:`~reactor.engine.dispatch.DispatchHandle` (``job_id`` ``""``) whose ``wait()``
     returns the run's outcome.
   * **taken**: nobody executes the run (it is queued for a worker, paused at an interrupt,
     waiting for a fan-out map, parked past its stamp, or its worker died): the canceller
     cancels it here, under the lock (so it never races a worker, which finds the lock held
     and comes back later to a ``cancelled`` run), running the undos and compensates in this
     process (:func:`reactor.engine.run_control.cancel.cancel_stored`), and returns the
     ``Failure`` of
     :class:`~reactor.errors.RunCancelledError`. A fan-out map whose elements are still
     running only stops dispatching: the run waits for it to settle and its resumed
     execution rolls it back (a ``DispatchHandle`` again). A run held ``failed_paused``
     (``on_failure="pause"``) is rolled back as its failure would have been
     (:func:`reactor.engine.run_control.failure_hold.cancel_held`).

   Either way an ``async_reactor`` child the run waits for is handed the same request at
   once (:func:`reactor.engine.run_control.cancel.hold_for_child`: cancelled here when nobody
   executes it, else by its own execution), and the run ends ``cancelled`` only once the child ended
   (a child that completed first is undone by the run's rollback). An ``async_reactor``
   child can also be cancelled by its own id: its parent's step then fails with the child's
   cancelled outcome.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from reactor.config import Runtime
from reactor.dsl.definition import ReactorDefinition
from reactor.engine import api, compatibility, liveness, retained
from reactor.engine.checkpoint import Checkpointer, load_context
from reactor.engine.dispatch import DispatchHandle, stored_result
from reactor.engine.dispatch_leases import mark_enqueued, run_unit
from reactor.engine.env import Env, make_env
from reactor.engine.liveness import Liveness
from reactor.engine.parks import Park
from reactor.engine.run_control import cancel as cancelling
from reactor.engine.run_control import deadline, failure_hold
from reactor.engine.run_control.arguments import MAX_TEXT_LENGTH, check_run_id, check_text
from reactor.engine.state import RunState
from reactor.errors import (
    CancelArgumentError,
    RunFinishedError,
    RunNotFoundError,
    RunStateError,
)
from reactor.model.context import Context
from reactor.model.engine_state import CancelRequest
from reactor.model.results import Failure, Paused, Success
from reactor.model.status import RunStatus
from reactor.ports.payloads import RunPayload, job

__all__ = ["MAX_REASON_LENGTH", "cancel"]

log = logging.getLogger("reactor.cancel")

#: The longest ``reason``, in characters.
MAX_REASON_LENGTH = MAX_TEXT_LENGTH
#: Bounds of the poll interval while a paused run's lock is briefly held, in seconds.
MIN_LOCK_POLL = 0.05
MAX_LOCK_POLL = 1.0

_FINISHED = frozenset(
    {RunStatus.COMPLETED, RunStatus.HALTED, RunStatus.FAILED, RunStatus.ABORTED}
)


def cancel(
    definition: ReactorDefinition | None,
    run_id: str,
    *,
    reason: str | None = None,
    rollback: bool = True,
    runtime: Runtime | None = None,
    sleep: Callable[[float], None] | None = None,
    deadline_passed: bool = False,
    in_worker: bool = False,
) -> Success | Failure | Paused | DispatchHandle:
    """Cancel run ``run_id`` (see the module docstring).

    Args:
        definition: the reactor the run must belong to; ``None``: any registered reactor.
        run_id: the run (a top-level run).
        reason: why, shown in ``RunView.cancel`` and the ``Failure`` (at most
            :data:`MAX_REASON_LENGTH` characters); ``None``: no reason.
        rollback: ``True`` (default): compensate the step in flight and undo the completed
            steps; ``False``: keep the completed work (``Reactor.undo`` can roll it back later).
        runtime: the runtime (default ``reactor.config.current()``).
        sleep: the waits of the undos run here (as for :func:`reactor.engine.api.run`).
        deadline_passed: the run's deadline passed (the ``run_deadline`` timer job,
            docs/concepts.md, "Run deadlines"): the request is the deadline's (``reason``
            and ``rollback`` are ignored) and the run ends ``failed`` with
            ``RunDeadlineExceeded`` instead of ``cancelled``.
        in_worker: the caller is a worker's job (the ``run_deadline`` timer): the rollback
            run here follows a worker's rule (docs/coordination.md, "Rollback"): an undo or
            compensate whose lock or semaphore another run holds is never waited for nor
            skipped; the run is saved with its rollback in progress and handed to its ``run``
            job, due after the park's delay (its liveness lock kept as a stamp until then),
            which finishes the stop; a :class:`DispatchHandle` is returned then.

    Returns:
        The ``Failure`` of :class:`~reactor.errors.RunCancelledError` (``run_id`` set, its
        ``rollback_failures`` listing undos or compensates that did not complete) when the
        run was cancelled by this call or before; a :class:`DispatchHandle` when the execution
        that owns the run finishes the cancel (its ``wait()`` returns the outcome: that
        ``Failure``, or the run's own end when it finished or failed before it noticed).

    Raises:
        CancelArgumentError: an unusable argument (``exc.field``); nothing read or claimed.
        RunNotFoundError: no stored run ``run_id`` (of this reactor).
        RunFinishedError: the run is ``completed``, ``halted``, ``failed`` or ``aborted``
            (``exc.status``); nothing changed.
        RunStateError: the run is a map element, or it is rolling back after a failure, or
            it is ``failed_paused`` and ``rollback`` is ``False`` (``exc.status``); nothing
            changed.
        DefinitionMismatchError: ``rollback`` and a step on the run's undo stack is not
            declared any more, has another kind or lost its undo (docs/deploys.md,
            "Compatibility rules"); nothing claimed or changed.
        UnknownReactorError: the run's reactor is not registered in this process.
        SecretKeyError: the run's sealed values cannot be opened with the configured keys.
        StorageError, LockLost: a backend failed, or the lock lapsed while cancelling (the
            request stays claimed: the run's next execution carries it out).
    """
    _check_arguments(run_id, reason, rollback)
    env = make_env(runtime, sleep)
    if in_worker:
        env = replace(env, in_worker=True)
    ctx = api.load_run(definition, run_id, env, open_secrets=False)
    done = _settled(ctx)
    if done is not None:
        return done
    if ctx.status is RunStatus.FAILED_PAUSED and not rollback and not deadline_passed:
        raise RunStateError(
            f"run {run_id!r} is failed_paused: a cancel rolls it back as its failure would "
            "have (rollback=False would leave its failed step uncompensated); rewind or fork "
            "it to keep its work", run_id=run_id, status=ctx.status.value,
        )
    if definition is None:
        definition = retained.definition_for(ctx)  # docs/deploys.md
    definition.register_codec_types()
    if rollback:  # its undos must all be declared, a deadline's timer job's too
        # (docs/deploys.md, "Compatibility rules": a rollback under a definition
        # without a completed step would skip its undo for good)
        compatibility.require(definition, ctx, forward=False)
    now = env.clock.now()
    stored_deadline = ctx.engine_state.deadline
    # a deadline that passed stands before any later cancel, whether its timer ran yet or not
    # (docs/concepts.md, "Run deadlines")
    overdue = stored_deadline is not None and (deadline_passed or now >= stored_deadline)
    wanted = (
        deadline.deadline_request(stored_deadline, now)
        if overdue and stored_deadline is not None
        else CancelRequest(reason, rollback, now)
    )
    request = cancelling.claim(env, run_id, wanted)
    hold = _take(env, run_id, paused=ctx.status is RunStatus.PAUSED)
    if hold is None or hold.lock is None:  # None: an execution owns it (re-entrant: ours)
        if hold is not None:
            hold.release()
        log.info("event=cancel_requested run_id=%s (the execution that owns it stops it)",
                 run_id)
        # an async_reactor child it waits for gets the request now, not when the owner
        # notices it: the owner's wait ends with the child's cancelled outcome
        state = RunState(definition, ctx, env, Checkpointer(env, ctx))
        try:
            cancelling.hold_for_child(state, request, cancelling.stored_in_flight(state))
        except Park as park:  # a worker's: the child's rollback waits for a hold
            _hand_to_worker(env, ctx, None, park)
        return _handle(env, ctx)
    try:
        return _cancel_here(env, definition, run_id, request, hold)
    except Park as park:  # a worker's: the rollback waits for a hold another run has
        _hand_to_worker(env, ctx, hold, park)
        return _handle(env, ctx)
    finally:
        hold.release()  # after the final save (a no-op once parked: the stamp stays)


def _hand_to_worker(env: Env, ctx: Context, hold: Liveness | None, park: Park) -> None:
    """A worker's rollback parked (``in_worker``; the run, or the ``async_reactor`` child it
    waits for, was saved with its rollback in progress): enqueue the run's ``run`` job after
    the park's delay, which finishes the stop, keeping the run's liveness lock as a
    ``parked_until`` stamp meanwhile (``hold``; ``None`` when another execution owns the
    run) so no sweep takes the run for lost (docs/workers.md, "Sweep cursors and dispatch
    leases")."""
    delay = park.delay
    log.info("event=cancel_parked run_id=%s reason=%s key=%s delay=%.2f (its run job finishes "
             "the rollback)", ctx.context_id, park.reason, park.key, delay)
    if hold is not None:
        hold.park(delay)
    mark_enqueued(env.runtime, run_unit(ctx.context_id), delay=delay)
    env.runtime.router.enqueue(job(RunPayload(context_id=ctx.context_id, reactor=ctx.reactor)),
                               delay)


def _take(env: Env, run_id: str, *, paused: bool) -> Liveness | None:
    """Take the run's liveness lock: one try, or for a paused run (whose lock is only held
    briefly: a resume being applied, an expiry, an attempt count) retries for up to
    ``context_lock_ttl`` seconds on the runtime clock, as long as the run stays paused (a
    resume that continues the run keeps the lock: its execution then carries the cancel out).

    Returns:
        The hold, or ``None`` when an execution owns the run.
    """
    hold = liveness.take(env, run_id)
    if hold is not None or not paused:
        return hold
    clock = env.clock
    deadline = clock.monotonic() + float(env.settings.context_lock_ttl)
    pause = MIN_LOCK_POLL
    while clock.monotonic() < deadline:
        clock.sleep(pause)
        pause = min(pause * 2, MAX_LOCK_POLL)
        hold = liveness.take(env, run_id)
        if hold is not None:
            return hold
        stored = load_context(env, run_id, open_secrets=False)
        if stored is None or stored.status is not RunStatus.PAUSED:
            return None
    return None


def _check_arguments(run_id: object, reason: object, rollback: object) -> None:
    """Refuse unusable arguments before anything is read.

    Raises:
        CancelArgumentError: naming the argument.
    """
    check_run_id("cancel", run_id, CancelArgumentError)
    check_text("cancel", "reason", reason, CancelArgumentError)
    if not isinstance(rollback, bool):
        raise CancelArgumentError(
            f"cancel(rollback=...) must be True or False, got {type(rollback).__name__}",
            field="rollback",
        )


def _settled(ctx: Context) -> Failure | None:
    """The outcome of a run a cancel has nothing to do for, or ``None`` (go on).

    Raises:
        RunStateError: a map element, or a run rolling back after a failure.
        RunFinishedError: a finished run.
    """
    run_id, status = ctx.context_id, ctx.status
    if ctx.map_metadata is not None:  # an async_reactor child is a run of its own
        raise RunStateError(
            f"run {run_id!r} is a map element of run {ctx.parent_context_id!r}; cancel the "
            "top-level run instead", run_id=run_id, status=status.value,
        )
    if status is RunStatus.CANCELLED:
        stored = stored_result(ctx)
        assert isinstance(stored, Failure)
        return stored
    if status in _FINISHED:
        hint = "finish its rollback with Reactor.undo" if status is RunStatus.ABORTED else (
            "roll it back with Reactor.undo" if status is not RunStatus.FAILED
            else "it was already rolled back")
        raise RunFinishedError(
            f"run {run_id!r} is {status.value}; only an unfinished run can be cancelled "
            f"({hint})", run_id=run_id, status=status.value,
        )
    cancelling = ctx.engine_state.cancel is not None
    if (status is RunStatus.ROLLING_BACK or ctx.rollback is not None) and not cancelling:
        raise RunStateError(
            f"run {run_id!r} is rolling back after a failure; it ends failed",
            run_id=run_id, status=status.value,
        )
    return None


def _handle(env: Env, ctx: Context) -> DispatchHandle:
    """The handle of a run whose cancel another execution finishes."""
    return DispatchHandle(
        run_id=ctx.context_id, job_id="", reactor=ctx.reactor,
        results=dict(ctx.intermediate_results), runtime=env.runtime,
    )


def _cancel_here(
    env: Env, definition: ReactorDefinition, run_id: str, request: CancelRequest,
    hold: Liveness,
) -> Failure | DispatchHandle:
    """Cancel the run under its liveness lock, in this process (see the module docstring)."""
    ctx = load_context(env, run_id, open_secrets=False)
    if ctx is None:
        raise RunNotFoundError(f"no stored run {run_id!r}", run_id=run_id)
    done = _settled(ctx)  # it may have finished while the lock was taken
    if done is not None:
        return done
    if failure_hold.held(ctx) is not None:  # on_failure="pause" (docs/operations.md)
        held = failure_hold.cancel_held(env, definition, run_id, request, hold)
        if held is not None:
            return held.with_run_id(run_id)
    failure = cancelling.cancel_stored(env, definition, run_id, request, hold)
    if failure is None:  # a map or a child must end first: the run's execution finishes it
        return _handle(env, ctx)
    return failure.with_run_id(run_id)

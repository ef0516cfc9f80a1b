"""``Reactor.suspend`` / ``Reactor.unsuspend``: an operator holds a run and lets it go
(docs/operations.md, "Suspend and unsuspend").

**Suspend.** The arguments are checked and the run read. A map element is refused (suspend
its top-level run), so is a finished run (:class:`~reactor.errors.RunFinishedError`) and one
rolling back (:class:`~reactor.errors.RunStateError`: it ends by itself); a run already
``suspended`` is answered ``"suspended"`` again. The request is claimed first-writer-wins in
the claims store under ``@suspend.<generation>`` (:func:`reactor.model.keys
.suspend_claim_path`; ``generation`` counts the run's unsuspends, so every suspension has a
path of its own), then the run's liveness lock is tried as a cancel tries it:

* **taken** (nobody executes the run: queued, parked past its stamp, paused at an
  interrupt, its worker dead): the run is stored ``suspended`` here, under the lock, with
  the request (``EngineState.suspension``: reason, who, when, and the status to give back:
  ``running`` or ``paused``); the locks and semaphore leases a park kept for it are released
  (an ordered-lock place is kept). Returns ``"suspended"``.
* **held** (an execution owns it): the execution reads the request with its next cancel check
  (every ``cancel_check_interval`` seconds at a step boundary, or with a checkpoint on a store
  that reads claims with its appends; a parked or retry-delayed run when its job comes back,
  before it takes its coordination again: :func:`at_start`) and suspends **before its next
  step**: the steps in
  flight finish and are recorded, no further step starts, the reactor-level holds are released
  as at an interrupt, and the run is stored ``suspended`` with ``current_step`` naming the
  step it will start with. Returns ``"requested"``.

A suspended run holds no lock or slot, keeps its undo stack, results and deadline, and is
listed with status ``suspended``; no sweep re-dispatches it; ``Reactor.cancel`` still works
on it (and so does its deadline).

**Unsuspend.** Under the run's liveness lock: a run that is not ``suspended`` is refused
(:class:`~reactor.errors.RunStateError`); else the suspension is removed, the generation
counted, and the run is stored back ``paused`` (it waits at its interrupt again) or
``running`` — then its ``run`` job is enqueued (persist before enqueue) and a worker continues
it at its next step. While the reactor's suspend switch is on, unsuspend is refused too.

**The reactor's switch** (:func:`suspend_all` with ``hold_new=True``,
:mod:`reactor.engine.run_control.reactor_suspension`): set before the runs listed now are
suspended, so every run of the reactor an execution continues later stops before its next step
as if it had been asked; :func:`unsuspend_all` clears it before it lets the runs go.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Literal

from reactor.config import Runtime
from reactor.dsl.definition import ReactorDefinition
from reactor.engine import api, liveness, sleeps
from reactor.engine.checkpoint import load_context
from reactor.engine.dispatch_leases import mark_enqueued, run_unit
from reactor.engine.env import Env, make_env
from reactor.engine.liveness import FencedCheckpointer
from reactor.engine.run_control import interrupts, reactor_suspension, suspension
from reactor.engine.run_control.arguments import MAX_TEXT_LENGTH, check_run_id, check_text
from reactor.errors import (
    LockAcquisitionError,
    RunFinishedError,
    RunNotFoundError,
    RunStateError,
    SuspendArgumentError,
)
from reactor.model.context import Context
from reactor.model.engine_state import Suspension
from reactor.model.keys import run_liveness_key, suspend_claim_path
from reactor.model.run_records import TraceRecord
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from reactor.ports.capabilities import RunsJobsInline
from reactor.ports.payloads import RunPayload, job

__all__ = [
    "MAX_TEXT_LENGTH", "reactor_switch", "suspend", "suspend_all", "unsuspend", "unsuspend_all",
]

log = logging.getLogger("reactor.suspend")

SuspendOutcome = Literal["suspended", "requested"]


def _check(call: str, run_id: object, **texts: object) -> None:
    """Refuse unusable arguments before anything is read.

    Raises:
        SuspendArgumentError: naming the argument.
    """
    check_run_id(call, run_id, SuspendArgumentError)
    for name, value in texts.items():
        check_text(call, name, value, SuspendArgumentError)


def _refuse(ctx: Context) -> None:
    """Raise when the run cannot be suspended (see the module docstring)."""
    run_id, status = ctx.context_id, ctx.status
    if ctx.map_metadata is not None:
        raise RunStateError(
            f"run {run_id!r} is a map element; suspend its top-level run "
            f"{ctx.root_context_id!r} instead", run_id=run_id, status=status.value,
        )
    if status in TERMINAL_STATUSES:
        raise RunFinishedError(
            f"run {run_id!r} is {status.value}; only an unfinished run can be suspended",
            run_id=run_id, status=status.value,
        )
    if status is RunStatus.FAILED_PAUSED:
        raise RunStateError(
            f"run {run_id!r} is failed_paused: it is held already; rewind, fork or cancel it",
            run_id=run_id, status=status.value,
        )
    if status is RunStatus.ROLLING_BACK or ctx.rollback is not None:
        raise RunStateError(
            f"run {run_id!r} is rolling back; it ends by itself", run_id=run_id,
            status=status.value,
        )


def suspend(
    definition: ReactorDefinition | None,
    run_id: str,
    *,
    reason: str | None = None,
    by: str | None = None,
    runtime: Runtime | None = None,
) -> SuspendOutcome:
    """Suspend run ``run_id`` (see the module docstring).

    Args:
        definition: the reactor the run must belong to; ``None``: any registered reactor.
        run_id: the top-level run.
        reason: why (shown in views and the dashboard), at most 1,000 characters.
        by: who asked, at most 1,000 characters.
        runtime: the runtime (default ``reactor.config.current()``).

    Returns:
        ``"suspended"`` when the run is stored ``suspended`` (by this call or before);
        ``"requested"`` when the execution that owns it suspends it before its next step.

    Raises:
        SuspendArgumentError: an unusable argument (``exc.field``); nothing read.
        RunNotFoundError: no stored run ``run_id`` (of this reactor).
        RunFinishedError: the run finished (``exc.status``); nothing changed.
        RunStateError: a map element, or a run rolling back; nothing changed.
        StorageError, LockLost: a backend failed.
    """
    _check("suspend", run_id, reason=reason, by=by)
    env = make_env(runtime)
    ctx = api.load_run(definition, run_id, env, open_secrets=False)
    if ctx.status is RunStatus.SUSPENDED:
        return "suspended"
    _refuse(ctx)
    path = suspend_claim_path(ctx.engine_state.suspend_generation)
    asked = Suspension(reason, by, env.clock.now())
    claims = env.storage.claims
    if not claims.claim_interrupt_resume(run_id, path, asked.encode()):
        standing = claims.interrupt_resumes(run_id, [path]).get(path)
        asked = suspension.decoded(run_id, standing) or asked
    hold = liveness.take(env, run_id)
    if hold is None or hold.lock is None:
        if hold is not None:
            hold.release()
        log.info("event=suspend_requested run_id=%s (the execution that owns it suspends "
                 "it before its next step)", run_id)
        return "requested"
    try:
        stored = load_context(env, run_id, open_secrets=False)
        if stored is None:
            raise RunNotFoundError(f"no stored run {run_id!r}", run_id=run_id)
        if stored.status is RunStatus.SUSPENDED:
            return "suspended"
        _refuse(stored)
        suspension.suspend_stored(env, stored, asked, FencedCheckpointer(env, stored, hold))
        return "suspended"
    finally:
        hold.release()


def unsuspend(
    definition: ReactorDefinition | None, run_id: str, *, runtime: Runtime | None = None,
) -> RunStatus:
    """Let a suspended run go on (see the module docstring).

    Args:
        definition: the reactor the run must belong to; ``None``: any registered reactor.
        run_id: the run.
        runtime: the runtime (default ``reactor.config.current()``).

    Returns:
        The status the run is stored with now: ``RunStatus.RUNNING`` (its ``run`` job is
        enqueued) or ``RunStatus.PAUSED`` (it waits at its interrupt again).

    Raises:
        SuspendArgumentError: an unusable ``run_id``.
        RunNotFoundError: no stored run ``run_id`` (of this reactor).
        RunStateError: the run is not ``suspended`` (``exc.status``), or its reactor's suspend
            switch is on (:func:`suspend_all` with ``hold_new``); nothing changed.
        LockAcquisitionError: the run's liveness lock stayed held (retry).
        StorageError, RouterError: a backend failed.
    """
    _check("unsuspend", run_id)
    env = make_env(runtime)
    ctx = api.load_run(definition, run_id, env, open_secrets=False)
    _require_suspended(ctx)
    if reactor_suspension.read(env, ctx.reactor) is not None:
        raise RunStateError(
            f"run {run_id!r} stays suspended: the suspend switch of reactor {ctx.reactor!r} "
            "is on (suspend_all(hold_new=True)); unsuspend_all clears it and lets its runs go",
            run_id=run_id, status=ctx.status.value,
        )
    hold = _take_suspended(env, run_id)
    try:
        stored = load_context(env, run_id, open_secrets=False)
        if stored is None:
            raise RunNotFoundError(f"no stored run {run_id!r}", run_id=run_id)
        suspension = _require_suspended(stored)
        stored.engine_state = replace(
            stored.engine_state, suspension=None,
            suspend_generation=stored.engine_state.suspend_generation + 1,
        )
        status = RunStatus.PAUSED if suspension.resume == "paused" else RunStatus.RUNNING
        stored.status = status
        stored.execution_trace.append(
            TraceRecord.of("unsuspended", stored.current_step, env.clock.now())
        )
        FencedCheckpointer(env, stored, hold).save()
    finally:
        hold.release()
    log.info("event=run_unsuspended run_id=%s status=%s", run_id, status.value)
    pending = stored.engine_state.interrupt
    if (status is RunStatus.PAUSED and pending is not None and pending.expiry == "active"
            and pending.deadline is not None):
        # its expiry job may have come and gone while it was suspended: schedule it again
        interrupts.schedule_expiry(env, run_id, stored.reactor, pending.step, pending.deadline)
    asleep = stored.engine_state.sleep
    if status is RunStatus.PAUSED and asleep is not None:
        # so may its wake-up (docs/schedules.md, "Durable sleep"): arm it again (a second
        # timer is harmless: the first to run wakes the run, the other finds it awake)
        sleeps.schedule_wake(env, run_id, stored.reactor, asleep.step, asleep.wake_at)
    if status is RunStatus.RUNNING:
        router = env.runtime.router
        if not isinstance(router, RunsJobsInline):
            mark_enqueued(env.runtime, run_unit(run_id))
        router.enqueue(job(RunPayload(context_id=run_id, reactor=stored.reactor)))
    return status


def _take_suspended(env: Env, run_id: str) -> liveness.Liveness:
    """Take a suspended run's liveness lock, which another operator call holds only briefly:
    one try, then short polls (on the runtime clock, :data:`_UNSUSPEND_WAIT` seconds at
    most) while the run stays suspended. A run no longer suspended meanwhile (another
    unsuspend won) is refused at once.

    Raises:
        RunStateError: the run is not suspended any more.
        LockAcquisitionError: the lock stayed held (try again).
    """
    clock = env.clock
    give_up = clock.monotonic() + _UNSUSPEND_WAIT
    while True:
        hold = liveness.take(env, run_id)
        if hold is not None:
            return hold
        stored = load_context(env, run_id, open_secrets=False)
        if stored is None:
            raise RunNotFoundError(f"no stored run {run_id!r}", run_id=run_id)
        _require_suspended(stored)
        if clock.monotonic() >= give_up:
            raise LockAcquisitionError(
                f"run {run_id!r} is held by another execution (its liveness lock); try again",
                key=run_liveness_key(run_id),
            )
        clock.sleep(_UNSUSPEND_POLL)


#: Seconds an unsuspend polls a suspended run's briefly held lock, and between two polls.
_UNSUSPEND_WAIT = 2.0
_UNSUSPEND_POLL = 0.02


def _require_suspended(ctx: Context) -> Suspension:
    """The run's suspension; raises when it is not suspended."""
    suspension = ctx.engine_state.suspension
    if ctx.status is not RunStatus.SUSPENDED or suspension is None:
        raise RunStateError(
            f"run {ctx.context_id!r} is {ctx.status.value}, not suspended",
            run_id=ctx.context_id, status=ctx.status.value,
        )
    return suspension


#: The statuses of runs :func:`suspend_all` asks to hold (a suspended one answers
#: ``"suspended"`` again).
_HOLDABLE = ("pending", "running", "paused", "suspended")


def _top_level_runs(env: Env, reactor: str, statuses: tuple[str, ...]) -> list[str]:
    """The ids of ``reactor``'s top-level runs listed with one of ``statuses`` (every page)."""
    ids: list[str] = []
    cursor: str | None = None
    while True:
        page = env.storage.contexts.page(
            cursor=cursor, limit=500, statuses=statuses, reactor=reactor
        )
        ids.extend(row.context_id for row in page.runs)
        cursor = page.next_cursor
        if cursor is None:
            return ids


def suspend_all(
    definition: ReactorDefinition, *, reason: str | None = None, by: str | None = None,
    hold_new: bool = False, runtime: Runtime | None = None,
) -> dict[str, int]:
    """Suspend every unfinished top-level run of a reactor now (each as :func:`suspend`
    does; docs/operations.md, "Suspend and unsuspend"); with ``hold_new``, first set the
    reactor's suspend switch, so the runs started or continued later are held too.

    Args:
        definition: the reactor.
        reason: why, at most 1,000 characters.
        by: who asked, at most 1,000 characters.
        hold_new: set the reactor's suspend switch first
            (:mod:`reactor.engine.run_control.reactor_suspension`): until
            :func:`unsuspend_all` clears it, every run of the reactor an execution continues
            (a new run, a background run a worker takes, a resumed one) stops before its next
            step, ``suspended`` with the switch's reason and ``by`` (first writer wins: a
            switch already set keeps its own). ``False``: runs started later are not held.
        runtime: the runtime (default ``reactor.config.current()``).

    Returns:
        ``{"suspended": n, "requested": n, "skipped": n}``: ``skipped`` counts runs that
        finished, started rolling back or expired meanwhile.

    Raises:
        SuspendArgumentError: an unusable ``reason``, ``by`` or ``hold_new``; nothing read.
        LockAcquisitionError: other operators changed the switch under this call (retry).
        StorageError: a backend failed (the runs counted so far are held).
    """
    _check("suspend_all", "-", reason=reason, by=by)
    if not isinstance(hold_new, bool):
        raise SuspendArgumentError(
            f"suspend_all(hold_new=...) must be a bool, got {type(hold_new).__name__}",
            field="hold_new",
        )
    env = make_env(runtime)
    if hold_new:
        standing = reactor_suspension.switch_on(
            env, definition.name, Suspension(reason, by, env.clock.now())
        )
        reason, by = standing.reason, standing.by  # the switch that stands speaks for it
    counts = {"suspended": 0, "requested": 0, "skipped": 0}
    for run_id in _top_level_runs(env, definition.name, _HOLDABLE):
        try:
            counts[suspend(definition, run_id, reason=reason, by=by, runtime=runtime)] += 1
        except (RunNotFoundError, RunStateError):  # finished or rolling back meanwhile
            counts["skipped"] += 1
    log.info("event=reactor_suspended reactor=%s hold_new=%s %s", definition.name, hold_new,
             " ".join(f"{k}={v}" for k, v in counts.items()))
    return counts


def unsuspend_all(
    definition: ReactorDefinition, *, runtime: Runtime | None = None,
) -> dict[str, int]:
    """Clear the reactor's suspend switch, if set, then unsuspend every suspended top-level
    run of the reactor (each as :func:`unsuspend`; docs/operations.md, "Suspend and
    unsuspend").

    Args:
        definition: the reactor.
        runtime: the runtime (default ``reactor.config.current()``).

    Returns:
        ``{"running": n, "paused": n, "skipped": n}``.

    Raises:
        LockAcquisitionError: other operators changed the switch under this call (retry).
        StorageError, RouterError: a backend failed (the runs counted so far go on).
    """
    env = make_env(runtime)
    reactor_suspension.switch_off(env, definition.name)
    counts = {"running": 0, "paused": 0, "skipped": 0}
    for run_id in _top_level_runs(env, definition.name, (RunStatus.SUSPENDED.value,)):
        try:
            counts[unsuspend(definition, run_id, runtime=runtime).value] += 1
        except (RunNotFoundError, RunStateError, LockAcquisitionError):
            counts["skipped"] += 1
    log.info("event=reactor_unsuspended reactor=%s %s", definition.name,
             " ".join(f"{k}={v}" for k, v in counts.items()))
    return counts


def reactor_switch(
    definition: ReactorDefinition, *, runtime: Runtime | None = None,
) -> Suspension | None:
    """The reactor's suspend switch as stored now (docs/operations.md, "Suspend and
    unsuspend").

    Args:
        definition: the reactor.
        runtime: the runtime (default ``reactor.config.current()``).

    Returns:
        The switch (``reason``, ``by``, ``at`` in epoch seconds on the runtime clock), or
        ``None`` when it is off.

    Raises:
        StorageError: a backend failed.
    """
    return reactor_suspension.read(make_env(runtime), definition.name)

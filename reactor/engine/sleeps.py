"""Reaching a ``sleep`` step: park the run until its wake time, and wake it (docs/schedules.md,
"Durable sleep").

The executor hands every ready ``sleep`` step to :func:`reach`. The wake time is computed once:
the first time the run reaches the step (from ``seconds=``, ``until=`` or ``from_input=``), then
read back from the root run's :class:`~reactor.model.engine_state.PendingSleep`, which stays on
the run until the step completes. A wake time that has passed completes the step at once
(``Success(None)``, no undo entry); one ahead returns a
:class:`~reactor.model.results.Paused` with ``sleeping_until`` set.

On that outcome the executor calls :func:`pause`: in a composed child it only marks the child
``paused`` (the root pauses in turn); at the root it stores the run ``paused`` with its sleep
marker and then enqueues the ``sleep_wake`` timer job with the delay (persist before enqueue).
The caller's liveness lock and holds are released as the execution returns: the sleeping run
holds no lock, slot or thread.

:func:`wake_due` is the timer job's work (and the run sweeper's for a sleeping run whose timer
was lost): under the run's liveness lock it stores the run ``running`` (the marker kept) and
enqueues its ``run`` job; the executor meets the sleep step again, finds its wake time passed
and goes on. A cancel or a run deadline stops a sleeping run as any paused run
(docs/run-control.md, "Cancel"; docs/concepts.md, "Run deadlines").

Times are read on the runtime clock (:attr:`reactor.config.Runtime.clock`; docs/testing.md,
"The clock").
"""

from __future__ import annotations

import logging
from dataclasses import replace

from reactor.dsl.declarations import StepSpec
from reactor.engine import liveness
from reactor.engine.checkpoint import load_context
from reactor.engine.env import Env
from reactor.engine.liveness import FencedCheckpointer
from reactor.engine.state import RunState
from reactor.engine.step_runner import StepOutcome
from reactor.errors import DeserializationError, SleepValueError
from reactor.model.context import Context
from reactor.model.engine_state import PendingSleep
from reactor.model.results import Failure, Paused, Success
from reactor.model.status import RunStatus
from reactor.ports.payloads import RunPayload, SleepWakePayload, job

__all__ = ["pause", "reach", "schedule_wake", "sleeping_at", "wake_due"]

log = logging.getLogger("reactor.sleeps")


def sleeping_at(ctx: Context) -> PendingSleep | None:
    """The sleep a stored run sleeps at: its marker when it is ``paused`` with one, else
    ``None`` (a run paused at an interrupt, or woken and running again)."""
    pending = ctx.engine_state.sleep
    return pending if ctx.status is RunStatus.PAUSED and pending is not None else None


def reach(state: RunState, spec: StepSpec) -> StepOutcome:
    """Run sleep step ``spec`` (see the module docstring).

    Args:
        state: the context whose step it is (a root run or a composed child).
        spec: the sleep step.

    Returns:
        ``Success(None)`` when the wake time has passed (the marker is cleared from the root
        run, saved with the step's checkpoint); ``Paused(sleeping_until=...)`` when it is
        ahead (nothing saved yet: :func:`pause` does that); a non-retryable
        ``Failure(SleepValueError)`` when the input read by ``from_input=`` is unusable.
        ``body_started`` is always ``False``.
    """
    decl = spec.sleep
    assert decl is not None  # a sleep step always carries its options
    path = state.path_prefix + spec.name
    root = state.checkpoint.context
    pending = root.engine_state.sleep
    now = state.env.clock.now()
    if pending is not None and pending.step == path:
        wake = pending.wake_at
    else:
        try:
            wake = decl.wake_at(now, dict(state.ctx.inputs))
        except SleepValueError as exc:
            return StepOutcome(Failure(exc, retryable=False), {}, body_started=False)
    if wake <= now:
        if pending is not None:
            root.engine_state = replace(root.engine_state, sleep=None)
        return StepOutcome(Success(None), {}, body_started=False)
    return StepOutcome(Paused(step=path, sleeping_until=wake), {}, body_started=False)


def pause(state: RunState, step: str, paused: Paused) -> Paused:
    """Stop the execution of ``state.ctx`` at a sleep whose wake time is ahead.

    Args:
        state: the context that reached it (directly, or through its composed child ``step``).
        step: this context's step that paused (the sleep, or the compose step).
        paused: the pause, ``step`` the sleep's full path and ``sleeping_until`` set.

    Returns:
        ``paused``.

    Raises:
        EncodeError, ContextTooLargeError, StorageError, LockLost: the root's save failed.
    """
    wake = paused.sleeping_until
    assert wake is not None
    ctx = state.ctx
    if not state.mark_paused(step, "sleeping", paused.step):  # the root pauses in turn
        return paused
    env = state.env
    pending = ctx.engine_state.sleep
    since = pending.since if pending is not None and pending.step == paused.step else (
        env.clock.now()
    )
    ctx.engine_state = replace(
        ctx.engine_state, sleep=PendingSleep(step=paused.step, wake_at=wake, since=since)
    )
    state.checkpoint.save()
    schedule_wake(env, ctx.context_id, ctx.reactor, paused.step, wake)
    return paused


def schedule_wake(env: Env, run_id: str, reactor: str, path: str, wake_at: float) -> None:
    """Enqueue the ``sleep_wake`` timer job of a sleeping run, due at ``wake_at``.

    The whole delay is asked for: routers honour any delay (one with a native maximum
    re-defers the job; docs/contract-suite.md), and the job re-enqueues itself when delivered
    early. Best effort: a router failure is logged, and the run sweeper wakes the run once
    its wake time passed.
    """
    delay = max(wake_at - env.clock.now(), 0.001)
    payload = SleepWakePayload(context_id=run_id, reactor=reactor, step=path, wake_at=wake_at)
    try:
        env.runtime.router.enqueue(job(payload), delay)
    except Exception as exc:
        log.warning("event=sleep_wake_not_scheduled run_id=%s step=%s error=%s (the run "
                    "sweeper wakes it)", run_id, path, exc)


def wake_due(env: Env, run_id: str, step: str | None, *, lock_wait: float) -> float | None:
    """Wake a run sleeping at ``step`` once its wake time passed: store it ``running`` under
    its liveness lock and enqueue its ``run`` job.

    Args:
        env: the worker's (or sweeper's) environment.
        run_id: the sleeping root run.
        step: the sleep's step path the timer was armed for; ``None`` (the sweeper): any.
        lock_wait: seconds to wait for the run's liveness lock.

    Returns:
        Seconds after which to try again (the wake time is ahead, or the run stayed locked),
        else ``None`` (woken, or nothing to do: the run no longer sleeps there).

    Raises:
        StorageError, RouterError: a backend failed.
    """
    try:
        ctx = load_context(env, run_id, open_secrets=False)
    except DeserializationError as exc:  # the run job quarantines unreadable runs
        log.warning("event=sleep_wake_skipped run_id=%s error=%s", run_id, exc)
        return None
    pending = None if ctx is None else sleeping_at(ctx)
    if pending is None or (step is not None and pending.step != step):
        return None
    left = pending.wake_at - env.clock.now()
    if left > 0:
        return left
    hold = liveness.take(env, run_id, wait=lock_wait)
    if hold is None:
        return float(env.settings.context_lock_ttl)
    try:
        ctx = load_context(env, run_id, open_secrets=False)
        if ctx is None or sleeping_at(ctx) != pending:
            return None
        ctx.status = RunStatus.RUNNING
        FencedCheckpointer(env, ctx, hold).save()
    finally:
        hold.release()
    env.runtime.router.enqueue(job(RunPayload(context_id=run_id, reactor=ctx.reactor)))
    log.info("event=sleep_woken run_id=%s step=%s wake_at=%.3f", run_id, pending.step,
             pending.wake_at)
    return None

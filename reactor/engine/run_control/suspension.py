"""A root run's suspension where it executes (docs/operations.md, "Suspend and unsuspend"):
the request an execution read (or its reactor's suspend switch,
:mod:`reactor.engine.run_control.reactor_suspension`), stopping before the next step, and
storing a run nobody executes ``suspended``. What operators call is
:mod:`reactor.engine.run_control.suspend`; the executor uses this module only (it sits below
the engine's entry points).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Literal

from reactor.engine import coordination
from reactor.engine.checkpoint import Checkpointer
from reactor.engine.env import Env
from reactor.engine.run_control import reactor_suspension
from reactor.engine.state import RunState
from reactor.errors import DeserializationError
from reactor.model.context import Context
from reactor.model.engine_state import Suspension
from reactor.model.results import Paused
from reactor.model.run_records import TraceRecord
from reactor.model.status import RunStatus

__all__ = ["at_start", "decoded", "noticed", "stop", "suspend_stored", "switched"]

log = logging.getLogger("reactor.suspend")


def decoded(run_id: str, text: str | None) -> Suspension | None:
    """A suspend claim's text decoded; the defaults when unreadable (someone asked)."""
    if text is None:
        return None
    try:
        return Suspension.decode(text)
    except DeserializationError as exc:
        log.warning("event=suspend_claim_unreadable run_id=%s error=%s", run_id, exc)
        return Suspension()


def at_start(state: RunState, asked: Suspension) -> Paused:
    """Suspend a stored root run an execution continues (a job delivered again, after a park
    or a retry delay), before its coordination and its next step: its parked holds are
    released. Returns what :func:`stop` returns.

    Raises:
        StorageError, LockLost: a backend failed, or the run is not this execution's any more.
    """
    ctx = state.ctx
    state.suspend_claim = None
    suspend_stored(state.env, ctx, asked, state.checkpoint)
    return Paused(step=ctx.current_step or "")


def suspend_stored(
    env: Env, ctx: Context, asked: Suspension, checkpoint: Checkpointer
) -> None:
    """Store a run nobody executes ``suspended`` (its parked holds released)."""
    resume: Literal["running", "paused"] = (
        "paused" if ctx.status is RunStatus.PAUSED else "running"
    )
    storage = env.storage
    for holds in ctx.engine_state.parked_holds.values():
        for hold in holds:
            coordination.release_parked(storage, hold, event="suspend_release")
    ctx.engine_state = replace(
        ctx.engine_state, parked_holds={}, waiting=None,
        suspension=replace(asked, resume=resume),
    )
    ctx.status = RunStatus.SUSPENDED
    ctx.execution_trace.append(
        TraceRecord.of("suspended", ctx.current_step, env.clock.now(), detail=asked.reason)
    )
    checkpoint.save()
    log.info("event=run_suspended run_id=%s by=%s at=stored", ctx.context_id, asked.by)


def noticed(state: RunState) -> Suspension | None:
    """The suspend request an execution of a root run read (with a cancel check or a
    checkpoint), else its reactor's suspend switch (:func:`switched`), or ``None``.

    Raises:
        StorageError: the lock store failed (a read of the switch was due).
    """
    text = state.suspend_claim
    if text is not None:
        return decoded(state.ctx.context_id, text)
    return switched(state)


#: The statuses in which a stored run's execution obeys its reactor's suspend switch.
_SWITCHABLE = frozenset({RunStatus.PENDING, RunStatus.RUNNING})


def switched(state: RunState) -> Suspension | None:
    """The suspend switch of the reactor of a stored top-level run (or ``async_reactor``
    child) that executes, or ``None`` (docs/operations.md, "Suspend and unsuspend"): read at
    most once every :data:`reactor_suspension.STALENESS` seconds per process and reactor.

    A run not stored yet is not checked (its first step's check, after its first save, is),
    nor a composed child or a map element (their top-level run stops before its next step), nor
    a run rolling back.

    Args:
        state: the execution.

    Returns:
        The switch (its reason, who and when become the run's suspension), or ``None``.

    Raises:
        StorageError: the lock store failed (a read was due).
    """
    ctx = state.ctx
    if (ctx.persisted is None or state.checkpoint.context is not ctx
            or ctx.map_metadata is not None or ctx.rollback is not None
            or ctx.status not in _SWITCHABLE):
        return None
    return reactor_suspension.cached(state.env, ctx.reactor)


def stop(state: RunState, step: str, asked: Suspension) -> Paused:
    """Suspend the executing root run before step ``step`` (nothing in flight): store it
    ``suspended`` with ``step`` as its resume cursor. The executor returns the ``Paused``
    this gives, so the reactor-level holds are released as at an interrupt; callers report the
    run by its status.

    Raises:
        StorageError, LockLost: a backend failed, or the run is not this execution's any more.
    """
    ctx = state.ctx
    ctx.current_step = step
    ctx.status = RunStatus.SUSPENDED
    ctx.engine_state = replace(ctx.engine_state, suspension=replace(asked, resume="running"))
    state.suspend_claim = None
    state.trace("suspended", step, detail=asked.reason)
    state.checkpoint.save()
    log.info("event=run_suspended run_id=%s by=%s at=%s", ctx.context_id, asked.by, step)
    return Paused(step=step)

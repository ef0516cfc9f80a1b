"""A failed run held before its rollback (``on_failure="pause"``; docs/operations.md, "Pause,
rewind, fork"): holding it where it executes, and rolling it back when an operator cancels it
(or its deadline passes).

**Holding.** When a step of a root run fails after its retries and its ``on_failure`` (the
step's, else the reactor's) is ``"pause"``, the executor calls :func:`hold` instead of starting
the rollback: the run is stored ``failed_paused`` with its failure (error, step; the
``failed`` trace entry carries the attempt), its results and its whole undo stack, and a
:class:`~reactor.model.engine_state.FailureHold` recording what the deferred rollback needs
(the failed step, its kind, whether its compensate is pending, its attempts, when).
``current_step`` names the failed step. The execution then ends as at an interrupt: its
reactor-level holds are released by the coordination, parked holds here; no sweep
re-dispatches the run (it is not ``running``) and it never expires (not terminal); its
deadline, if any, still stands (its timer job is scheduled here for a caller's run). A composed
child or a map element is never held (its root's step fails and the root's ``on_failure``
decides), nor a run a cancel or its deadline is stopping, nor one whose cancel was requested
while the failing step ran: that run rolls back as if it had no ``on_failure``.

**Cancelling it** (:func:`cancel_held`, reached through ``Reactor.cancel`` or the run's
deadline): under the run's liveness lock the deferred rollback is recorded exactly as the
failure path records it (the failed step's compensate pending when its body started, the
rollback failures already met) and carried out: the compensate receives the step's own
failure, every entry left on the undo stack is undone once, newest first. The run ends
``cancelled`` (``failed`` with ``RunDeadlineExceeded`` for a deadline).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from reactor.dsl.declarations import StepSpec
from reactor.dsl.definition import ReactorDefinition
from reactor.engine import coordination, rollback
from reactor.engine.arguments import resolve_arguments
from reactor.engine.checkpoint import load_context
from reactor.engine.dispatch import publish_completion
from reactor.engine.env import Env
from reactor.engine.liveness import Liveness
from reactor.engine.run_control import cancel, deadline
from reactor.engine.state import RunState
from reactor.errors import ArgumentResolutionError, ContextTooLargeError, EncodeError
from reactor.model.context import Context
from reactor.model.engine_state import CancelRequest, FailureHold
from reactor.model.results import Failure
from reactor.model.status import RunStatus

__all__ = ["cancel_held", "held", "hold", "pauses"]

log = logging.getLogger("reactor.failure_hold")


def pauses(state: RunState, spec: StepSpec) -> bool:
    """Whether a failure of ``spec`` holds the run instead of rolling it back (see the module
    docstring).

    Args:
        state: the executing run.
        spec: the step that failed after its retries.

    Returns:
        ``True`` for a root run whose step (or reactor) declares ``on_failure="pause"`` and
        that no cancel or deadline is stopping: neither one being carried out nor a cancel
        requested while the step ran (one claims read, on this path only), which the run
        honours by rolling back at once, the failed step compensated.

    Raises:
        StorageError: the claims store failed.
    """
    return (
        state.definition.pauses_on_failure(spec.name)
        and cancel.is_root(state)
        and state.ctx.engine_state.cancel is None
        and cancel.requested(state.env, state.ctx.context_id) is None
    )


def hold(
    state: RunState, spec: StepSpec, failure: Failure, *, compensate_pending: bool
) -> Failure | None:
    """Store the run ``failed_paused`` at failed step ``spec`` (see the module docstring).

    Args:
        state: the executing root run (its ``failed`` trace entry already appended).
        spec: the failed step.
        failure: the run's failure (step, error, the rollback failures already met).
        compensate_pending: the step's body started: a later rollback compensates it.

    Returns:
        ``failure``, the run stored held; ``None`` when the held run cannot be stored (an
        unstorable failure): nothing changed, the caller rolls back as usual.

    Raises:
        StorageError, LockLost: a backend failed, or the run is not this execution's any more.
    """
    ctx = state.ctx
    before = (ctx.engine_state, ctx.status, ctx.current_step, ctx.failure)
    storage = state.env.storage
    for holds in ctx.engine_state.parked_holds.values():
        for parked in holds:
            coordination.release_parked(storage, parked, event="failure_hold_release")
    ctx.engine_state = replace(
        ctx.engine_state, parked_holds={}, waiting=None,
        failure_hold=FailureHold(
            step=spec.name, kind=spec.kind, compensate_pending=compensate_pending,
            # a step without Retries counts no attempts: its one attempt is the first
            attempt=ctx.attempts_of(spec.name) or (1 if compensate_pending else None),
            at=state.env.clock.now(),
        ),
    )
    ctx.failure = failure
    ctx.status = RunStatus.FAILED_PAUSED
    ctx.current_step = spec.name
    state.in_flight = None
    state.trace("failure_paused", spec.name, detail=failure.message)
    try:
        state.checkpoint.save()
    except (EncodeError, ContextTooLargeError):
        ctx.engine_state, ctx.status, ctx.current_step, ctx.failure = before
        ctx.execution_trace.pop()
        return None
    log.info("event=run_failure_paused run_id=%s step=%s", ctx.context_id, spec.name)
    stored_deadline = ctx.engine_state.deadline
    if stored_deadline is not None and not state.env.in_worker:
        # a caller's run gets its timer only when it leaves the call unfinished, as this one
        # does now (a worker's got it when it was handed off; a second one is harmless)
        deadline.schedule(state.env, ctx.context_id, ctx.reactor, stored_deadline)
    return failure


def held(ctx: Context) -> FailureHold | None:
    """The hold of a ``failed_paused`` run, else ``None``."""
    if ctx.status is not RunStatus.FAILED_PAUSED:
        return None
    return ctx.engine_state.failure_hold


def _compensate_arguments(state: RunState, step: str) -> dict[str, Any]:
    """The failed leaf step's arguments resolved again from the held run (its results are
    kept), for its compensate; ``{}`` when they cannot be."""
    spec = state.definition.steps.get(step)
    if spec is None:
        return {}
    try:
        return resolve_arguments(spec, state.ctx)
    except ArgumentResolutionError:
        return {}


def cancel_held(
    env: Env, definition: ReactorDefinition, run_id: str, request: CancelRequest,
    liveness: Liveness,
) -> Failure | None:
    """Roll back held run ``run_id`` for ``request`` under its liveness lock ``liveness``, in
    this process (see the module docstring).

    Args:
        env: the execution environment (secrets opened: the compensate and undos run here).
        definition: the run's reactor.
        run_id: the run.
        request: the cancel (or deadline) request that stands.
        liveness: the caller's hold on the run's liveness lock (released by the caller).

    Returns:
        The run's final ``Failure`` (without ``run_id``; the completion published), or
        ``None`` when the run is not held any more (the caller goes on as for any run).

    Raises:
        StorageError, LockLost: a backend failed (the request stays claimed).
    """
    ctx = load_context(env, run_id)
    found = None if ctx is None else held(ctx)
    if ctx is None or found is None:
        return None
    state = RunState(definition, ctx, env, cancel.HolderCheckpointer(env, ctx, liveness))
    original = ctx.failure
    ctx.engine_state = replace(ctx.engine_state, failure_hold=None, cancel=request)
    ctx.status = RunStatus.RUNNING  # a crash from here on: a worker finishes the cancel
    state.trace("deadline" if request.cause == "deadline" else "cancelled", found.step,
                detail=request.reason)
    arguments = _compensate_arguments(state, found.step) if found.compensate_pending else {}
    rollback.begin(
        state, step=found.step, kind=found.kind, arguments=arguments,
        compensate_pending=found.compensate_pending,
        failures=list(original.rollback_failures) if original is not None else [],
    )
    try:
        state.checkpoint.save()
    except (EncodeError, ContextTooLargeError):
        pass  # the final save reports it; the rollback must run regardless
    failure = cancel.conclude(state)
    publish_completion(env.storage, ctx)
    log.info("event=held_run_rolled_back run_id=%s step=%s", run_id, found.step)
    return failure

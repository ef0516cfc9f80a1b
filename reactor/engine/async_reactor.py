"""``async_reactor`` in the parent run: starting a child reactor as its own background run and
reading its outcome (docs/run-control.md, "async_reactor"; the invariants of
docs/architecture.md, "Execution invariants").

**Dispatch.** The child's run id is derived from the parent's id and the step name
(:func:`child_run_id`, a UUID5), so a parent executed again — a crash, a redelivered job, a
park — finds the child it started instead of starting a second one. When no run is stored
under that id, the child's inputs are resolved and validated (a violation fails the step, no
child is stored), the child is stored ``running`` with ``parent_context_id`` (the parent),
``root_context_id`` and ``dispatched_child`` (the run sweeper lists it like a root), then its
``run`` job is enqueued: persist before enqueue. The parent traces ``dispatched``.

**Waiting.** Steps that depend on the ``async_reactor`` step run once it has the child's
outcome. A synchronous parent blocks on the child's completion channel, re-checking the stored
child and polling (:func:`reactor.engine.dispatch.wait_for_run`), up to
``async_wait_timeout``; inside a worker (``Env.in_worker``) the parent **parks** at the step
(:class:`~reactor.engine.parks.Park`, reason ``"async_wait"``, uncapped, with the back-off of
:func:`reactor.engine.async_step.reader_park_delay`) and re-checks when its job comes back,
bounded by ``async_park_timeout`` measured from the child's creation. A wait that runs out
fails the step with :class:`~reactor.errors.AsyncWaitTimeoutError` (the child keeps running:
it is its own run).

**Outcome.** A completed child's result is the step's result and the step goes on the parent's
undo stack with the child's run id: undoing it replays the child's stored undo stack, newest
first, and stores the child ``cancelled`` (:mod:`reactor.engine.rollback`), so a second
rollback finds nothing to undo. A failed child already rolled back its own steps: the step
fails with the child's ``Failure`` (its rollback failures prefixed with the step's name) and
the parent rolls back its completed steps; nothing is compensated. A halted child halts the
parent, like a composed one. A child paused at an interrupt keeps a worker parent parked; a
synchronous parent fails the step (:class:`~reactor.errors.RunStateError`).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from reactor.dsl.deadlines import absolute_deadline
from reactor.dsl.declarations import StepSpec
from reactor.dsl.fingerprint import definition_id
from reactor.engine.arguments import resolve_arguments
from reactor.engine.async_step import reader_park_delay
from reactor.engine.checkpoint import Checkpointer, load_context
from reactor.engine.dispatch import stored_result, wait_for_run
from reactor.engine.parks import Park, park_delay
from reactor.engine.run_control import deadline as run_deadline
from reactor.engine.state import RunState
from reactor.engine.step_runner import StepOutcome
from reactor.errors import (
    ArgumentResolutionError,
    AsyncWaitTimeoutError,
    InputValidationError,
    RunStateError,
)
from reactor.model.context import Context
from reactor.model.keys import CHILD_ID_NAMESPACE, child_run_id
from reactor.model.results import Failure, Halt, Paused, Result, Success
from reactor.model.run_records import UndoEntry
from reactor.model.status import RunStatus
from reactor.ports.payloads import RunPayload, job

__all__ = ["CHILD_ID_NAMESPACE", "child_run_id", "run_async_reactor"]

log = logging.getLogger("reactor.async_reactor")


def run_async_reactor(state: RunState, spec: StepSpec) -> StepOutcome:
    """Run ``async_reactor`` step ``spec`` of ``state.ctx`` (see the module docstring):
    start the child run unless it is stored already, then wait for (or park on) its outcome.

    Args:
        state: the parent run being executed.
        spec: the ``async_reactor`` step.

    Returns:
        The step's outcome: the child's ``Success``/``Halt`` with an undo entry naming the
        child run, or a ``Failure`` (the child's, invalid inputs, a wait that ran out).

    Raises:
        Park: inside a worker, while the child is not finished (the parent was checkpointed).
        EncodeError, ContextTooLargeError, StorageError, RouterError: storing the child or
            enqueueing its job failed.
    """
    ctx = state.ctx
    env = state.env
    name = spec.name
    child_id = child_run_id(ctx.context_id, name)
    child = load_context(env, child_id)
    if child is None:
        try:
            arguments = resolve_arguments(spec, ctx)
            inputs = state.definition.children[name].contract.validate(arguments)
        except ArgumentResolutionError as exc:
            return StepOutcome(Failure(exc, retryable=False), {}, body_started=False)
        except InputValidationError as exc:
            failure = Failure(exc, retryable=False, validation_errors=exc.field_errors)
            return StepOutcome(failure, arguments, body_started=False)
        child = _dispatch(state, spec, child_id, inputs)
    inputs = dict(child.inputs)
    stored = stored_result(child)
    result: Result = (
        _wait(state, name, child) if stored is None or isinstance(stored, Paused) else stored
    )
    return _outcome(name, child_id, inputs, result)


def _dispatch(
    state: RunState, spec: StepSpec, child_id: str, inputs: dict[str, Any]
) -> Context:
    """Store the child run, checkpoint the parent, then enqueue the child's ``run`` job."""
    ctx = state.ctx
    env = state.env
    definition = state.definition.children[spec.name]
    child = Context(
        context_id=child_id,
        reactor=definition.name,
        inputs=inputs,
        status=RunStatus.RUNNING,
        redacted=state.definition.child_redacted(spec.name, ctx.redacted),
        parent_context_id=ctx.context_id,
        root_context_id=ctx.root_context_id or ctx.context_id,
        created_at=env.now(),
    )
    # stamped like a top-level run, so its own run job judges it (docs/deploys.md,
    # "Compatibility rules")
    child.engine_state = replace(child.engine_state, definition=definition_id(definition))
    # a run of its own: its reactor's class deadline holds from its start (docs/concepts.md,
    # "Run deadlines"), with its timer, as for a top-level run
    child_deadline = absolute_deadline(None, definition.deadline, child.created_at)
    if child_deadline is not None:
        child.engine_state = replace(child.engine_state, deadline=child_deadline)
    Checkpointer(env, child).save()  # dispatched_child: a parent and no map metadata
    state.trace("dispatched", spec.name)
    state.checkpoint.save()
    env.runtime.router.enqueue(job(RunPayload(context_id=child_id, reactor=definition.name)))
    if child_deadline is not None:
        run_deadline.schedule(env, child_id, definition.name, child_deadline)
    log.info("event=async_reactor_dispatched context_id=%s step=%s child=%s",
             ctx.context_id, spec.name, child_id)
    return load_context(env, child_id) or child  # an inline router ran it inside enqueue


def _wait(state: RunState, name: str, child: Context) -> Result:
    """The finished child's result: a synchronous wait, or a park inside a worker."""
    env = state.env
    if env.in_worker:
        bound = env.settings.async_park_timeout
        waited = env.now() - child.created_at
        if bound is not None and waited >= bound:
            return Failure(AsyncWaitTimeoutError(
                f"async_reactor {name!r} of run {state.ctx.context_id!r}: child run "
                f"{child.context_id!r} did not finish within the async_park_timeout of "
                f"{bound:g}s", run_id=child.context_id, timeout=bound,
            ), retryable=False)
        delay = reader_park_delay(park_delay(env.settings), waited)
        if bound is not None:
            delay = min(delay, max(bound - waited, 0.1))
        raise Park(delay=delay, reason="async_wait", key=f"{child.context_id}", step=name)
    try:
        result = wait_for_run(env.runtime, child.context_id)
    except AsyncWaitTimeoutError as exc:
        return Failure(exc, retryable=False)
    if isinstance(result, Paused):
        return Failure(RunStateError(
            f"async_reactor {name!r}: child run {child.context_id!r} is paused at interrupt "
            f"{result.step!r}; a synchronous parent cannot wait for a resume",
            run_id=child.context_id, status=RunStatus.PAUSED.value,
        ), retryable=False)
    return result


def _outcome(name: str, child_id: str, inputs: dict[str, Any], result: Result) -> StepOutcome:
    if isinstance(result, Failure):
        flattened = [f.nested(name) for f in result.rollback_failures]
        return StepOutcome(
            replace(result, rollback_failures=flattened, run_id=None), inputs, body_started=True
        )
    assert isinstance(result, Success)
    entry = UndoEntry(step=name, kind="async_reactor", arguments=inputs, result=None,
                      child_run_id=child_id)
    value: Success = (
        Halt(result.reason, step_name=result.step_name, value=result.value)
        if isinstance(result, Halt) else Success(result.value)
    )
    return StepOutcome(value, inputs, body_started=True, undo_entry=entry)

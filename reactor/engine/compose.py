"""Compose steps: running a child reactor inline (docs/concepts.md, "Compose").

The child runs in the same process with its own context, embedded in the parent's
``composed_contexts[step]`` and saved with the parent's record. Its inputs are validated first
(a violation fails the compose step without starting the child). A failed child rolls itself
back before the parent sees the ``Failure``: the parent's compensate of the compose step is then
a no-op, and the child's rollback failures are flattened into the parent's, prefixed with the
compose step's name. A completed child puts the compose step on the parent's undo stack;
undoing it replays the child's undo stack (:mod:`reactor.engine.rollback`). A child that
reaches an interrupt pauses, and the parent pauses with it: the interrupt's step path is the
compose step's name, a dot, then the child's path (docs/run-control.md, "Interrupts"); the
resumed parent resumes the ``paused`` child like any embedded child.

**Resume.** When the parent re-enters a compose step whose child is already embedded (a worker
resuming the run after a crash, a park, a retry delay or a hand-off), the embedded child is
resumed, never re-created (``docs/workers.md``, "Composed children resume"):

* ``running``/``pending``/``paused`` — the child continues from its own checkpoint with its
  recorded results and undo stack (completed child steps are not run again) and its
  engine state (reactor- and step-level holds it parked are re-adopted, its admission is
  not charged twice); a child rollback a crash cut off (``rollback`` set, no final status) is
  finished instead;
* ``aborted`` — an interruption hit it: a forward interruption resumes it like a crash (the
  step in flight runs again, at least once); one that hit its rollback finishes the rollback;
* ``completed`` — its stored value, without running anything;
* ``halted`` — its stored halt (the compose step goes on the parent's undo stack);
* ``failed`` — its stored ``Failure`` (it already rolled itself back: nothing is undone twice);
* ``cancelled`` — a ``Failure`` (it was rolled back by an undo; nothing runs again).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from reactor.dsl.declarations import StepSpec
from reactor.dsl.definition import ReactorDefinition
from reactor.engine.arguments import resolve_arguments
from reactor.engine.invoke import INTERRUPTIONS
from reactor.engine.state import Executor, InFlight, RunState
from reactor.engine.step_runner import StepOutcome
from reactor.errors import ArgumentResolutionError, InputValidationError
from reactor.model.context import Context, new_context_id
from reactor.model.results import Failure, Halt, Paused, Success
from reactor.model.run_records import UndoEntry
from reactor.model.status import RunStatus

__all__ = ["run_compose"]


def run_compose(state: RunState, spec: StepSpec, executor: Executor) -> StepOutcome:
    """Run compose step ``spec``: the child to its end, rolled back if it failed.

    A child already embedded in ``state.ctx.composed_contexts[spec.name]`` is resumed from its
    stored state instead of being re-created (see the module docstring for each status).

    Args:
        state: the parent run being executed.
        spec: the compose step.
        executor: the executor's entry points, which run the child (the executor passes its
            own: it dispatches compose steps here, and the child is executed like any run).

    Returns:
        The step's outcome: the child's ``Success``/``Halt`` with an undo entry replaying the
        child's undo stack, its ``Failure`` (already rolled back, its rollback failures
        prefixed with the compose step's name), or its ``Paused`` (the child is embedded
        ``paused``; the parent pauses too).

    Raises:
        KeyboardInterrupt, SystemExit, ...: an interruption, after storing the child
            ``aborted``; ``Park``, ``RetryLater``, ``MapDispatched``, ``RollbackHandedOff`` and
            ``HandOff`` propagate with the child saved in the parent's record.
    """
    ctx = state.ctx
    name = spec.name
    child_definition = state.definition.children[name]
    embedded = ctx.composed_contexts.get(name)
    if isinstance(embedded, Context):
        return _resume(state, spec, child_definition, embedded, executor)
    try:
        arguments = resolve_arguments(spec, ctx)
        inputs = child_definition.contract.validate(arguments)
    except ArgumentResolutionError as exc:
        return StepOutcome(Failure(exc, retryable=False), {}, body_started=False)
    except InputValidationError as exc:
        failure = Failure(exc, retryable=False, validation_errors=exc.field_errors)
        return StepOutcome(failure, arguments, body_started=False)
    state.in_flight = InFlight(step=name, kind="compose", arguments=inputs, body_started=True)
    child = Context(
        context_id=new_context_id(),
        reactor=child_definition.name,
        inputs=inputs,
        redacted=state.definition.child_redacted(name, ctx.redacted),
        parent_context_id=ctx.context_id,
        root_context_id=ctx.root_context_id or ctx.context_id,
        created_at=state.now(),
    )
    ctx.composed_contexts[name] = child
    result = executor.execute(_child_state(state, name, child_definition, child))
    return _outcome(name, inputs, result)


def _child_state(
    state: RunState, name: str, definition: ReactorDefinition, child: Context
) -> RunState:
    """The execution state of the child embedded at compose step ``name``: saved with the
    parent's record, under the parent's holds, its step paths prefixed with ``name.``."""
    return RunState(
        definition, child, state.env, state.checkpoint, holds=state.holds,
        path_prefix=f"{state.path_prefix}{name}.",
    )


def _outcome(
    name: str, inputs: dict[str, Any], result: Success | Failure | Paused
) -> StepOutcome:
    if isinstance(result, Paused):  # the child waits at an interrupt: so does the parent
        return StepOutcome(result, inputs, body_started=True)
    entry = UndoEntry(step=name, kind="compose", arguments=inputs, result=None)
    if isinstance(result, Failure):
        flattened = [f.nested(name) for f in result.rollback_failures]
        return StepOutcome(
            replace(result, rollback_failures=flattened, run_id=None), inputs, body_started=True
        )
    # A halted child keeps its progress: the entry lets Reactor.undo roll it back later.
    return StepOutcome(result, inputs, body_started=True, undo_entry=entry)


def _resume(
    state: RunState,
    spec: StepSpec,
    definition: ReactorDefinition,
    child: Context,
    executor: Executor,
) -> StepOutcome:
    """Resume (or read back the outcome of) the child already embedded at ``spec.name``."""
    name = spec.name
    inputs = dict(child.inputs)
    state.in_flight = InFlight(step=name, kind="compose", arguments=inputs, body_started=True)
    status = child.status
    if status is RunStatus.COMPLETED:
        value: Any = child.returned_value(definition.returns)
        return _outcome(name, inputs, Success(value))
    if status is RunStatus.HALTED:
        return _outcome(name, inputs, _stored_halt(child))
    if status is RunStatus.FAILED:
        failure = child.failure or Failure(
            "the composed child failed", retryable=False, reactor_name=child.reactor
        )
        return _outcome(name, inputs, failure)
    if status is RunStatus.CANCELLED:
        return _outcome(name, inputs, Failure(
            f"composed child {child.context_id} was rolled back (cancelled)",
            retryable=False, reactor_name=child.reactor,
        ))
    child_state = _child_state(state, name, definition, child)
    if child.rollback is not None and child.failure is None:
        child.rollback = None  # an interruption of forward work: resume like a crash
    if child.rollback is not None:  # a crash (or interruption) cut the child's rollback off
        child.status = RunStatus.RUNNING
        try:
            result: Success | Failure | Paused = executor.conclude_failure(child_state)
        except INTERRUPTIONS as exc:
            executor.abort(child_state, exc)
            raise
    else:
        result = executor.execute(child_state)
    return _outcome(name, inputs, result)


def _stored_halt(child: Context) -> Halt:
    """The ``Halt`` a halted child returned, rebuilt from its trace (reason and step)."""
    entry = child.last_trace("halt")
    return Halt(None) if entry is None else Halt(entry.detail, step_name=entry.step)

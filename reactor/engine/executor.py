"""The executor: runs a context's steps in dependency order (docs/concepts.md, "A synchronous run").

Ready steps (all dependencies complete) run **sequentially in definition order**, batch by
batch. After each step:

* ``Success`` — the value is recorded, the step is pushed on the undo stack, checkpoint;
* ``Skipped`` — the value is recorded (it flows to dependants), no undo entry, checkpoint;
* ``Halt`` — the run stops without rollback, status ``halted``;
* ``Paused`` — an ``interrupt`` step (directly, or inside a composed child) waits for a resume:
  the run is stored ``paused`` (:mod:`reactor.engine.run_control.interrupts`; docs/run-control.md,
  "Interrupts"); a resumed interrupt's payload is recorded like a ``Skipped`` value (no undo
  entry), traced ``resumed``;
* an ``async_step`` is dispatched as its own job and counts as complete for scheduling only
  (:mod:`reactor.engine.async_dispatch`); it is never recorded nor pushed on the undo stack;
* an ``async_reactor`` step starts its child as a run of its own and waits (or parks) for
  its result, recorded like a compose step's (:mod:`reactor.engine.async_reactor`);
* ``Failure`` — the step is compensated if its body started, every completed step is undone
  newest first (:mod:`reactor.engine.rollback`), status ``failed``; a failing compensate turns
  the final error into :class:`~reactor.errors.CompensationError`.

A root run checks for a cancel request before a continued execution starts and at every step
boundary, before a ``Success`` or a ``Paused`` is recorded
(:mod:`reactor.engine.run_control.cancel`;
docs/run-control.md, "Cancel"): the run then stops there, rolls back and is stored
``cancelled``.

Interruptions (``KeyboardInterrupt``, ``SystemExit``, ...) store the context as ``aborted``
with its remaining undo stack (and the step in flight as "compensate pending" when its body had
started), then propagate; ``Reactor.undo(run_id)`` finishes the rollback later.

The step kinds that run a nested execution call back into this module through parameters, not
imports (docs/architecture.md, "Layers"): a compose step gets an
:class:`~reactor.engine.state.Executor` of :func:`execute`, :func:`conclude_failure` and
:func:`abort`; an inline map gets :func:`execute` for its element runs; the reactor-level
coordination gets the rollback it runs when it stops a run with completed steps; and every
rollback gets :func:`reactor.engine.maps.rollback.roll_back_fan_out` for fan-out map steps.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

from reactor.dsl.declarations import StepSpec
from reactor.dsl.definition import ReactorDefinition
from reactor.engine import (
    async_dispatch,
    async_reactor,
    async_step,
    coordination,
    observe,
    rollback,
    step_transactions,
)
from reactor.engine.compose import run_compose
from reactor.engine.invoke import INTERRUPTIONS, trimmed_traceback
from reactor.engine.maps import fan_out
from reactor.engine.maps.inline import run_map
from reactor.engine.maps.rollback import roll_back_fan_out
from reactor.engine.run_control import cancel, interrupts
from reactor.engine.state import Executor, RunState
from reactor.engine.step_runner import StepOutcome, run_leaf
from reactor.errors import CompensationError, ContextTooLargeError, DependencyError, EncodeError
from reactor.model import codec
from reactor.model.results import (
    Failure,
    Halt,
    Paused,
    RollbackFailure,
    Skipped,
    Success,
    exception_class_name,
)
from reactor.model.run_records import UndoEntry
from reactor.model.status import RunStatus

__all__ = ["abort", "conclude_failure", "execute"]


def _run_step(state: RunState, spec: StepSpec) -> StepOutcome:
    state.ctx.current_step = spec.name
    if spec.kind == "compose":
        return run_compose(
            state, spec,
            Executor(execute=execute, conclude_failure=conclude_failure, abort=abort),
        )
    if spec.kind == "map":
        if fan_out.fans_out(state, spec):  # a hand-off point (docs/fan_out.md)
            return fan_out.run_fan_out(state, spec)
        return run_map(
            state, spec,
            executor=Executor(execute=execute, conclude_failure=conclude_failure, abort=abort),
        )
    if spec.kind == "interrupt":
        return interrupts.reach(state, spec)
    if spec.kind == "async_reactor":  # a child run of its own (docs/run-control.md)
        return async_reactor.run_async_reactor(state, spec)
    return run_leaf(state, spec)


def _observed_step(state: RunState, spec: StepSpec) -> StepOutcome:
    """:func:`_run_step` in a middleware step scope (docs/observability.md, "Middleware") for
    a compose, map or interrupt step; a leaf step has one scope per attempt (step_runner)."""
    if spec.kind == "step":
        return _run_step(state, spec)
    with observe.step(state, spec.name, kind=spec.kind) as seen:
        outcome = _run_step(state, spec)
        seen.done(outcome.result)
        return outcome


def execute(state: RunState) -> Success | Failure | Paused:
    """Run every remaining step of ``state.ctx`` and return the run's result.

    The context's inputs must already be validated. Steps with a recorded result are treated as
    complete (so a resumed context continues where it stopped).

    Returns:
        ``Success`` (the ``returns`` value or all results), ``Halt``, ``Failure``, or
        ``Paused`` when the run stopped at an interrupt (stored ``paused``); a ``Failure`` of
        :class:`~reactor.errors.RunCancelledError` when a cancel request stopped it (stored
        ``cancelled``: docs/run-control.md, "Cancel").

    Raises:
        KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError, CancelledError: after storing
            the context as ``aborted``.
    """
    try:
        with async_step.reading(state.env):
            cancelled = cancel.at_start(state)  # a stored run continuing: one claims read
            if cancelled is not None:
                return cancelled
            return coordination.run_coordinated(state, _execute, roll_back=_roll_back_completed)
    except INTERRUPTIONS as exc:
        abort(state, exc)
        raise


def _roll_back_completed(state: RunState) -> list[RollbackFailure]:
    """Undo every completed step of ``state.ctx`` (no step in flight): the rollback the
    reactor-level coordination runs when it fails a run that already has an undo stack."""
    rollback.begin(state, step=None, kind=None, arguments=None, compensate_pending=False)
    return rollback.finish(state, roll_back_fan_out=roll_back_fan_out)


class _Schedule:
    """Which steps run next: waves of the steps whose dependencies have all completed, each
    wave in declaration order (a step made ready during a wave runs in the next one).

    Counts each step's unmet dependencies, so finding the next wave costs what completed, not
    the size of the reactor (a 1,000-step chain is not quadratic).
    """

    def __init__(self, definition: ReactorDefinition, completed: set[str]) -> None:
        self._order = {name: i for i, name in enumerate(definition.steps)}
        self.pending: dict[str, int] = {}
        self._dependents: dict[str, list[str]] = {}
        for name in definition.steps:
            if name in completed:
                continue
            unmet = [dep for dep in definition.dependencies[name] if dep not in completed]
            self.pending[name] = len(unmet)
            for dep in unmet:
                self._dependents.setdefault(dep, []).append(name)
        self._wave = [name for name, unmet in self.pending.items() if not unmet]

    def next_wave(self) -> list[str]:
        """The steps to run now, in declaration order (empty: nothing can run)."""
        wave, self._wave = sorted(self._wave, key=self._order.__getitem__), []
        return wave

    def done(self, name: str) -> None:
        """Mark ``name`` completed (or dispatched, for an ``async_step``)."""
        self.pending.pop(name, None)
        for dependent in self._dependents.pop(name, ()):
            self.pending[dependent] -= 1
            if not self.pending[dependent]:
                self._wave.append(dependent)

    def remaining(self) -> list[str]:
        """The steps not completed yet, in declaration order."""
        return sorted(self.pending, key=self._order.__getitem__)


def _execute(state: RunState) -> Success | Failure | Paused:
    try:
        return _execute_steps(state)
    finally:  # a transactional step stopped before its checkpoint: nothing of it commits
        step_transactions.discard(state)


def _execute_steps(state: RunState) -> Success | Failure | Paused:
    ctx = state.ctx
    definition = state.definition
    stored_running = _stored_running(state)
    ctx.status = RunStatus.RUNNING
    try:
        if stored_running:  # nothing to store before the first step: its checkpoint will
            if ctx.persisted is not None and ctx.inputs is not ctx.persisted.inputs:
                codec.dumps(ctx.inputs)  # ...carry inputs validated since: encodable?
        else:
            state.checkpoint.save()
    except (EncodeError, ContextTooLargeError) as exc:
        return _unstorable_inputs(state, exc)
    schedule = _Schedule(definition, set(ctx.intermediate_results)
                         | async_step.dispatched_units(ctx))
    while schedule.pending:
        ready = schedule.next_wave()
        if not ready:
            raise DependencyError(
                f"{definition.name}: no step is ready among {schedule.remaining()}"
            )
        for name in ready:
            spec = definition.steps[name]
            request = cancel.before_step(state)  # read with the last checkpoint, if any
            if request is not None:
                return cancel.stop(state, request, in_flight=None, coordinated=True)
            if state.hand_off is not None:  # background before: (docs/workers.md)
                state.hand_off(state, "before", name)
            if spec.kind == "async_step":  # complete for scheduling only
                refused = async_dispatch.dispatch(state, spec)
                if refused is not None:
                    return _fail(state, spec, StepOutcome(refused, {}, body_started=False))
                schedule.done(name)
                continue
            outcome = _observed_step(state, spec)
            lost = state.lost_hold()
            if lost is not None:  # the run's own lock/lease/turn lapsed while the step ran
                outcome = replace(
                    outcome, result=coordination.hold_lost(state, name, outcome.result, lost)
                )
            result = outcome.result
            if not isinstance(result, Success):  # nothing of it commits (a lost hold too)
                step_transactions.discard(state)
            request = cancel.at_boundary(state, result, kind=spec.kind)  # one claims read
            if request is not None:
                return cancel.stop_at_boundary(
                    state, spec, outcome, request, record=partial(_record, state, spec, outcome)
                )
            if isinstance(result, Paused):
                return interrupts.pause(state, name, result)
            if isinstance(result, Halt):
                return _halt(state, name, result, outcome)
            if isinstance(result, Failure):
                return _fail(state, spec, outcome)
            # The last step's checkpoint is the run's final one when nothing runs after it.
            final = (  # (a length test: copying the pending names was quadratic in the chain)
                state.hand_off is None and len(schedule.pending) == 1 and name in schedule.pending
            )
            stored = _record(state, spec, outcome, final=final)
            if stored is not None:
                return _fail(state, spec, stored)
            schedule.done(name)
            if state.hand_off is not None:  # background after: (docs/workers.md)
                state.hand_off(state, "after", name)
    if ctx.status is not RunStatus.COMPLETED:  # the last step's checkpoint did not finish it
        ctx.status = RunStatus.COMPLETED
        ctx.current_step = None
        state.checkpoint.save()
    return Success(_run_value(state))


def _stored_running(state: RunState) -> bool:
    """Whether the run is already stored ``running`` exactly as loaded (a worker continuing
    it), with no reactor-level coordination whose admission the start checkpoint records: the
    start checkpoint would store nothing a crash before the first step's could lose (the
    next execution validates the inputs again), so it is skipped."""
    ctx = state.ctx
    return (
        ctx.status is RunStatus.RUNNING
        and ctx.persisted is not None
        and not state.definition.coordination
    )


def _run_value(state: RunState) -> Any:
    """The value a completed run returns: its ``returns`` step's result, else every result."""
    return state.ctx.returned_value(state.definition.returns)


def _unstorable_inputs(state: RunState, exc: Exception) -> Failure:
    """The run cannot even be stored (an input the codec cannot encode): fail it, no step ran."""
    ctx = state.ctx
    shown = {k: "<unstorable>" for k in ctx.inputs}
    failure = Failure(
        exc, retryable=False, reactor_name=state.definition.name, inputs=shown,
        traceback=trimmed_traceback(exc),
    )
    ctx.inputs = shown
    ctx.status = RunStatus.FAILED
    ctx.failure = failure
    state.checkpoint.save()
    return failure


def _record(
    state: RunState, spec: StepSpec, outcome: StepOutcome, *, final: bool = False
) -> StepOutcome | None:
    """Record a successful step and checkpoint; on an unstorable value return a failure.

    ``final``: no step runs after this one, so this checkpoint completes the run (status
    ``completed``, never throttled) instead of being followed by a checkpoint of its own.
    """
    ctx = state.ctx
    name = spec.name
    result = outcome.result
    assert isinstance(result, Success)
    ctx.intermediate_results[name] = result.value
    pushed = False
    if isinstance(result, Skipped):
        state.trace("skipped", name)
    elif spec.kind == "interrupt":  # the resumed payload: nothing to undo
        state.trace("resumed", name)
    else:
        entry = outcome.undo_entry or UndoEntry(
            step=name, kind=spec.kind, arguments=outcome.arguments, result=result.value,
        )
        ctx.undo_stack.append(_with_secret_names(state, entry))
        pushed = True
        state.trace("run", name, attempt=ctx.attempts_of(name))
    ctx.current_step = None
    state.in_flight = None
    if final:
        ctx.status = RunStatus.COMPLETED
    transactional = state.step_transaction is not None
    try:
        with step_transactions.committing(state):  # docs/concepts.md, "Transactional steps"
            state.checkpoint.save(force=final or transactional)
        if state.env.settings.checkpoint_min_interval > 0:  # a throttled save encoded nothing
            codec.dumps(ctx.undo_stack[-1].to_stored() if pushed else result.value)
    except (EncodeError, ContextTooLargeError) as exc:
        # The value cannot be stored: the step fails (its side effect happened: compensate).
        ctx.status = RunStatus.RUNNING
        del ctx.intermediate_results[name]
        if pushed:
            ctx.undo_stack.pop()
        ctx.execution_trace.pop()
        failure = Failure(exc, retryable=False, traceback=trimmed_traceback(exc))
        return StepOutcome(failure, outcome.arguments, body_started=True)
    return None


def _with_secret_names(state: RunState, entry: UndoEntry) -> UndoEntry:
    """``entry`` with ``redacted``: its secret argument names, when it has any (they are
    sealed at rest and masked in views; docs/security.md, "What is encrypted")."""
    names = state.definition.secret_arguments(
        entry.step, dict(entry.arguments), state.ctx.redacted,
    )
    return replace(entry, redacted=tuple(names)) if names else entry


def _halt(state: RunState, name: str, result: Halt, outcome: StepOutcome) -> Halt:
    ctx = state.ctx
    if outcome.undo_entry is not None:
        ctx.undo_stack.append(_with_secret_names(state, outcome.undo_entry))
    state.trace("halt", name, detail=None if result.reason is None else str(result.reason))
    ctx.status = RunStatus.HALTED
    ctx.current_step = None
    state.in_flight = None
    with step_transactions.committing(state):  # a halting transactional step's writes
        state.checkpoint.save()
    return Halt(result.reason, step_name=name, value=result.value)


def _fail(state: RunState, spec: StepSpec, outcome: StepOutcome) -> Failure:
    ctx = state.ctx
    definition = state.definition
    name = spec.name
    raw = outcome.result
    assert isinstance(raw, Failure)
    failure = replace(
        raw,
        step_name=name,
        reactor_name=definition.name,
        inputs=definition.redact_arguments(name, outcome.arguments),
        run_id=None,
    )
    state.trace(
        "failed", name, detail=failure.message,
        attempt=ctx.attempts_of(name),
    )
    ctx.failure = failure
    state.in_flight = None
    rollback.begin(
        state,
        step=name,
        kind=spec.kind,
        arguments=outcome.arguments,
        compensate_pending=outcome.body_started and spec.kind == "step",
        failures=list(failure.rollback_failures),
    )
    try:  # the rollback intent survives a crash (a worker resumes it)
        state.checkpoint.save()
    except (EncodeError, ContextTooLargeError):
        pass  # the final save reports it; the rollback must run regardless
    return conclude_failure(state)


def conclude_failure(state: RunState) -> Failure:
    """Finish the rollback recorded in ``state.ctx`` and store the run as ``failed``.

    Used right after a step failed, and by a worker resuming a run whose rollback was cut off
    by a crash (``ctx.rollback`` set while the status is still ``running``): the pending
    compensate runs, then every entry left on the undo stack is undone, newest first.

    A root run whose rollback a cancel started (``EngineState.cancel``) is finished as a
    cancel instead (:func:`reactor.engine.run_control.cancel.conclude`: stored ``cancelled``).

    Returns:
        The run's final ``Failure`` (with ``rollback_failures``; a failed compensate turns the
        error into :class:`~reactor.errors.CompensationError`).
    """
    ctx = state.ctx
    if ctx.engine_state.cancel is not None and cancel.is_root(state):
        return cancel.conclude(state)
    failure = ctx.failure or Failure(
        "the run failed while rolling back", retryable=False, reactor_name=ctx.reactor
    )
    name = (ctx.rollback.step if ctx.rollback else None) or failure.step_name or ""
    failures = rollback.finish(state, roll_back_fan_out=roll_back_fan_out)
    assert ctx.rollback is not None
    if ctx.rollback.compensate_failed:
        error = CompensationError(
            f"compensate of step {name!r} failed while rolling back: {failure.message}",
            step_name=name,
            original=failure.error,
        )
        failure = replace(
            failure, error=error, exception_class=exception_class_name(error), retryable=False
        )
    failure = replace(failure, rollback_failures=failures)
    ctx.failure = failure
    ctx.rollback = None
    ctx.status = RunStatus.FAILED
    ctx.current_step = None
    state.checkpoint.save()
    return failure


def abort(state: RunState, interruption: BaseException) -> None:
    """Store ``state.ctx`` as ``aborted`` after an interruption (best effort, never raises).

    When the step in flight had started its body, its compensate is recorded as pending so that
    ``Reactor.undo`` runs it (docs/concepts.md, "Decisions"); the compensate then receives a
    ``Failure`` naming the interruption.

    Args:
        state: the context being executed.
        interruption: the ``KeyboardInterrupt``/``SystemExit``/... that stopped it.
    """
    ctx = state.ctx
    in_flight = state.in_flight
    if ctx.rollback is None and in_flight is not None and in_flight.body_started:
        rollback.begin(
            state,
            step=in_flight.step,
            kind=in_flight.kind,
            arguments=in_flight.arguments,
            compensate_pending=True,
        )
    if ctx.rollback is not None and ctx.rollback.interruption is None:
        ctx.rollback = replace(ctx.rollback, interruption=type(interruption).__name__)
    ctx.status = RunStatus.ABORTED
    try:
        state.checkpoint.save()
    except Exception:  # the interruption matters more than a failed save
        pass

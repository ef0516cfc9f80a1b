"""The executor: runs a context's steps in dependency order (docs/concepts.md, "A synchronous run").

Ready steps (all dependencies complete) run **sequentially in definition order**, batch by
batch; a reactor with ``max_concurrency`` above 1 runs ready leaf steps as concurrent branches
instead (:func:`_execute_concurrently`, :mod:`reactor.engine.branches`; docs/concepts.md,
"Concurrency"), recording each as it settles by the same rules. After each step:

* ``Success`` — the value is recorded, the step is pushed on the undo stack, checkpoint;
* ``Skipped`` — the value is recorded (it flows to dependants), no undo entry, checkpoint;
* ``Halt`` — the run stops without rollback, status ``halted``;
* ``Paused`` — an ``interrupt`` step (directly, or inside a composed child) waits for a resume:
  the run is stored ``paused`` (:mod:`reactor.engine.run_control.interrupts`; docs/run-control.md,
  "Interrupts"); a resumed interrupt's payload is recorded like a ``Skipped`` value (no undo
  entry), traced ``resumed``; a ``sleep`` step whose wake time is ahead pauses the run the
  same way with a sleep marker (:mod:`reactor.engine.sleeps`; docs/schedules.md, "Durable
  sleep"), and once it woke records ``None`` (no undo entry), traced ``woke``;
* an ``async_step`` is dispatched as its own job and counts as complete for scheduling only
  (:mod:`reactor.engine.async_dispatch`); it is never recorded nor pushed on the undo stack;
* an ``async_reactor`` step starts its child as a run of its own and waits (or parks) for
  its result, recorded like a compose step's (:mod:`reactor.engine.async_reactor`);
* ``Failure`` — the step is compensated if its body started, every completed step is undone
  newest first (:mod:`reactor.engine.rollback`), status ``failed``; a failing compensate turns
  the final error into :class:`~reactor.errors.CompensationError`. Under
  ``on_failure="pause"`` a root run is held ``failed_paused`` instead, before any rollback
  (:mod:`reactor.engine.run_control.failure_hold`; docs/operations.md, "Pause, rewind,
  fork").

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

from dataclasses import dataclass, replace
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
    sleeps,
    step_transactions,
)
from reactor.engine.branches import Branch, Branches, branches_off
from reactor.engine.compose import run_compose
from reactor.engine.invoke import INTERRUPTIONS, trimmed_traceback
from reactor.engine.maps import fan_out
from reactor.engine.maps.inline import run_map
from reactor.engine.maps.rollback import roll_back_fan_out
from reactor.engine.parks import Park
from reactor.engine.run_control import cancel, failure_hold, interrupts, suspension
from reactor.engine.state import Executor, RunState
from reactor.engine.step_runner import StepOutcome, run_leaf
from reactor.errors import CompensationError, ContextTooLargeError, DependencyError, EncodeError
from reactor.model import codec
from reactor.model.engine_state import CancelRequest
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
    if spec.kind == "sleep":  # a durable pause until a time (docs/schedules.md)
        return sleeps.reach(state, spec)
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
            asked = suspension.noticed(state)  # read with it (docs/operations.md)
            if asked is not None and cancel.is_root(state):
                return suspension.at_start(state, asked)  # before its coordination: no holds
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

    def peek(self) -> list[str]:
        """The steps ready to start, in declaration order, left ready until :meth:`take`."""
        return sorted(self._wave, key=self._order.__getitem__)

    def take(self, name: str) -> None:
        """``name`` starts: it is no longer ready (it stays pending until :meth:`done`)."""
        self._wave.remove(name)

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
    # Background hand-off points run one step at a time (the run moves at a step boundary).
    if definition.max_concurrency > 1 and state.hand_off is None:
        return _execute_concurrently(state, schedule)
    while schedule.pending:
        ready = schedule.next_wave()
        if not ready:
            raise DependencyError(
                f"{definition.name}: no step is ready among {schedule.remaining()}"
            )
        for name in ready:
            stopped = _run_alone(state, definition.steps[name], schedule)
            if stopped is not None:
                return stopped
    return _complete(state)


def _complete(state: RunState) -> Success:
    """Every step completed: store the run ``completed`` (unless the last step's checkpoint
    did) and return its value."""
    ctx = state.ctx
    if ctx.status is not RunStatus.COMPLETED:  # the last step's checkpoint did not finish it
        ctx.status = RunStatus.COMPLETED
        ctx.current_step = None
        state.checkpoint.save()
    return Success(_run_value(state))


def _run_alone(
    state: RunState, spec: StepSpec, schedule: _Schedule
) -> Success | Failure | Paused | None:
    """Run step ``spec`` (of any kind) with nothing else in flight, record it and mark it
    done in ``schedule``.

    Returns:
        The run's result when the step stopped the run (a cancel, a pause, a halt, a
        failure), else ``None``: the run goes on.
    """
    name = spec.name
    request = cancel.before_step(state)  # read with the last checkpoint, if any
    if request is not None:
        return cancel.stop(state, request, in_flight=None, coordinated=True)
    asked = suspension.noticed(state)  # read with a cancel check (docs/operations.md)
    if asked is not None:
        return suspension.stop(state, name, asked)
    if state.hand_off is not None:  # background before: (docs/workers.md)
        state.hand_off(state, "before", name)
    if spec.kind == "async_step":  # complete for scheduling only
        refused = async_dispatch.dispatch(state, spec)
        if refused is not None:
            return _fail(state, spec, StepOutcome(refused, {}, body_started=False))
        schedule.done(name)
        return None
    outcome = _checked(state, name, _observed_step(state, spec))
    result = outcome.result
    request = cancel.at_boundary(state, result, kind=spec.kind)  # one claims read
    if request is not None:
        return cancel.stop_at_boundary(
            state, spec, outcome, request, record=partial(_record, state, spec, outcome)
        )
    if isinstance(result, Paused) and result.sleeping_until is not None:
        return sleeps.pause(state, name, result)
    if isinstance(result, Paused):
        return interrupts.pause(state, name, result)
    if isinstance(result, Halt):
        return _halt(state, name, result, outcome)
    if isinstance(result, Failure):
        return _fail(state, spec, outcome)
    stored = _record(state, spec, outcome, final=_is_last(state, schedule, name))
    if stored is not None:
        return _fail(state, spec, stored)
    schedule.done(name)
    if state.hand_off is not None:  # background after: (docs/workers.md)
        state.hand_off(state, "after", name)
    return None


def _is_last(state: RunState, schedule: _Schedule, name: str) -> bool:
    """Whether ``name``'s checkpoint is the run's final one: nothing runs after it (a length
    test: copying the pending names was quadratic in the chain)."""
    return state.hand_off is None and len(schedule.pending) == 1 and name in schedule.pending


def _checked(state: RunState, name: str, outcome: StepOutcome) -> StepOutcome:
    """``outcome`` failed with :class:`~reactor.errors.LockLost` when a reactor-level hold of
    the run lapsed while the step ran; a step result that is no ``Success`` (a lost hold too)
    commits nothing of a transactional step."""
    lost = state.lost_hold()
    if lost is not None:  # the run's own lock/lease/turn lapsed while the step ran
        outcome = replace(
            outcome, result=coordination.hold_lost(state, name, outcome.result, lost)
        )
    if not isinstance(outcome.result, Success):
        step_transactions.discard(state)
    return outcome


@dataclass
class _Stop:
    """Why a concurrent execution stops starting steps (:func:`_first` picks the one that
    holds)."""

    branch: Branch | None = None
    outcome: StepOutcome | None = None
    error: BaseException | None = None
    request: CancelRequest | None = None

    @property
    def rank(self) -> int:
        """Higher wins: an interruption, a failure, another exception, a halt, a cancel and
        last a park (a branch waiting for a hold is no outcome of the run: whatever else
        stops the run stops it, and the parked branch gives its holds back)."""
        if self.error is not None:
            if isinstance(self.error, INTERRUPTIONS):
                return 4
            return -1 if isinstance(self.error, Park) else 2
        if self.outcome is not None:
            return 3 if isinstance(self.outcome.result, Failure) else 1
        return 0

    @property
    def owes_compensate(self) -> bool:
        """Whether the cause is a branch that raised after its body started: its compensate
        is owed (an aborted run records it pending)."""
        return self.branch is not None and self.error is not None and self.branch.body_started


def _execute_concurrently(state: RunState, schedule: _Schedule) -> Success | Failure | Paused:
    """Run the remaining steps with up to ``max_concurrency`` leaf steps in flight
    (docs/concepts.md, "Concurrency"): ready steps start in declaration order as branches
    (:mod:`reactor.engine.branches`), except one that would contend with a branch of its own
    run for a step-level lock, period or semaphore key (it starts once that branch settled);
    a step that cannot branch runs alone once nothing is in flight. This thread records every
    settled branch, checkpointing each, in the order they settle. The first failure, halt,
    cancel, park or exception stops new starts; the branches in flight finish (their
    successes recorded, so the rollback undoes them); then the run stops for the cause that
    ranks highest (:class:`_Stop`).

    An interruption of this thread anywhere in the group (a Ctrl-C while it waits, records a
    branch or compensates one) is such a cause: the branches in flight still settle and are
    recorded before it propagates. An ``Exception`` of this thread (a failed checkpoint)
    propagates once every branch in flight finished, unrecorded: no branch runs on after the
    caller has its error."""
    sibling_failures: list[RollbackFailure] = []
    with Branches(state, state.definition.max_concurrency, _observed_step) as group:
        try:
            stop = _run_group(state, schedule, group, sibling_failures)
        except Exception:  # a failed checkpoint...: no branch runs on after the caller knows
            group.drain()
            raise
        if isinstance(stop, Success | Failure | Paused):
            return stop  # a step that ran alone stopped the run
    return _stopped(state, stop, sibling_failures) if stop is not None else _complete(state)


def _run_group(
    state: RunState,
    schedule: _Schedule,
    group: Branches,
    sibling_failures: list[RollbackFailure],
) -> _Stop | Success | Failure | Paused | None:
    """The loop of :func:`_execute_concurrently`: start, wait, record, until every step
    completed (``None``), a step that ran alone stopped the run (its result) or a stop cause
    holds and every branch settled (the cause)."""
    definition = state.definition
    stop: _Stop | None = None
    settled: list[Branch] = []
    while True:
        try:
            while settled:  # one at a time: an interruption leaves the rest to record
                stop = _settle_branch(state, schedule, settled.pop(0), stop, sibling_failures)
            if stop is None:
                started = _start_ready(state, schedule, group)
                if isinstance(started, _Stop):
                    stop = started
                elif started is not None:
                    return started
            if not group.busy:
                if stop is not None or not schedule.pending:
                    return stop
                if not schedule.peek():
                    raise DependencyError(
                        f"{definition.name}: no step is ready among {schedule.remaining()}"
                    )
                continue
            settled.extend(group.wait())
        except INTERRUPTIONS as exc:  # a Ctrl-C: let the branches in flight settle
            if stop is None and not group.busy and not settled:
                raise  # nothing of the group is pending: as in a sequential run
            stop = _first(state, stop, _Stop(error=exc), sibling_failures)


def _start_ready(
    state: RunState, schedule: _Schedule, group: Branches
) -> Success | Failure | Paused | _Stop | None:
    """Start the ready steps that may start now, in declaration order (see
    :func:`_execute_concurrently`).

    Returns:
        A cancel request read before a start (as a :class:`_Stop`); the run's result when a
        step that ran alone stopped the run; else ``None``.
    """
    definition = state.definition
    for name in schedule.peek():
        spec = definition.steps[name]
        if not branches_off(spec):
            if group.busy:
                return None  # runs alone, once the branches in flight settle
            schedule.take(name)
            return _run_alone(state, spec, schedule)  # what it made ready starts next pass
        if group.full:
            return None
        if not group.admits(spec):
            continue  # a branch in flight holds its lock, period or semaphore key: later
        request = cancel.before_step(state)
        if request is not None:
            return _Stop(request=request)
        asked = suspension.noticed(state)
        if asked is not None:  # start nothing more; suspend once the branches settle
            return None if group.busy else suspension.stop(state, name, asked)
        schedule.take(name)
        state.ctx.current_step = name
        group.start(spec)
    return None


def _settle_branch(
    state: RunState,
    schedule: _Schedule,
    branch: Branch,
    stop: _Stop | None,
    sibling_failures: list[RollbackFailure],
) -> _Stop | None:
    """Record one settled branch; return the stop cause that holds after it."""
    spec = branch.spec
    if branch.error is not None:
        return _first(state, stop, _Stop(branch=branch, error=branch.error), sibling_failures)
    assert branch.outcome is not None
    outcome = _checked(state, spec.name, branch.outcome)
    if isinstance(outcome.result, Success) and not isinstance(outcome.result, Halt):
        stored = _record(
            state, spec, outcome, final=stop is None and _is_last(state, schedule, spec.name),
            started=branch.started,
        )
        if stored is None:
            schedule.done(spec.name)
            if stop is None and schedule.pending:  # a step boundary: a cancel stops here
                request = cancel.at_boundary(state, outcome.result)  # one claims read
                if request is not None:
                    return _Stop(request=request)
            return stop
        outcome = stored
    return _first(state, stop, _Stop(branch=branch, outcome=outcome), sibling_failures)


def _first(
    state: RunState, stop: _Stop | None, cause: _Stop, sibling_failures: list[RollbackFailure]
) -> _Stop:
    """The stop cause that wins between the current one and a new one (the higher
    :attr:`_Stop.rank`; the earlier wins a tie). The loser is given up at once
    (:func:`_give_up`), except an interrupted branch that loses to an interruption owing
    no compensate (a Ctrl-C of the waiting thread): the winner takes the branch over, so
    the aborted run records its compensate pending (``Reactor.undo`` runs it)."""
    if stop is None:
        return cause
    winner, loser = (cause, stop) if cause.rank > stop.rank else (stop, cause)
    if winner.rank == loser.rank == 4 and loser.owes_compensate and not winner.owes_compensate:
        return replace(winner, branch=loser.branch)
    _give_up(state, loser, sibling_failures)
    return winner


def _give_up(state: RunState, loser: _Stop, sibling_failures: list[RollbackFailure]) -> None:
    """Settle a branch whose stop cause lost: a branch that failed, or was interrupted or
    raised after its body started, is compensated now with its own failure (its compensate
    failure joins ``sibling_failures``): nothing else would, as the run stops for another
    cause; inside a worker too, its compensate waits for its holds instead of parking. A
    parked branch gives its holds back (the run does not wait for them any more)."""
    branch = loser.branch
    if branch is None:
        return
    name = branch.name
    if isinstance(loser.error, Park):
        _release_parked(state, name)
        return
    if loser.outcome is not None and isinstance(loser.outcome.result, Failure):
        failure, arguments = loser.outcome.result, loser.outcome.arguments
    elif loser.error is not None and branch.state.in_flight is not None:
        failure, arguments = _failure_of(name, loser.error), branch.state.in_flight.arguments
    else:
        return  # a halt: nothing to settle
    state.trace("failed", name, detail=failure.message, attempt=state.ctx.attempts_of(name))
    if branch.body_started:
        # No park: the run's rollback record does not hold this compensate, so a redelivery
        # would not resume it (nor know the run failed); its holds are waited for in this
        # thread, up to their rollback_wait, as in a synchronous rollback.
        waits = replace(state, env=replace(state.env, in_worker=False))
        sibling_failures.extend(rollback.compensate_sibling(waits, name, arguments, failure))


def _failure_of(name: str, error: BaseException) -> Failure:
    """What the compensate of a branch that raised ``error`` receives: the failure an
    aborted run's pending compensate gets for an interruption, else the exception."""
    if isinstance(error, INTERRUPTIONS):
        return Failure(f"step interrupted by {type(error).__name__}", retryable=False,
                       step_name=name)
    return Failure(error, retryable=False, step_name=name,
                   traceback=trimmed_traceback(error))


def _release_parked(state: RunState, name: str) -> None:
    """Release the holds branch ``name`` parked with (detached and recorded for a
    redelivery that will not come for them) and forget them and its wait."""
    ctx = state.ctx
    for entry in ctx.engine_state.parked_holds.get(name, ()):
        coordination.release_parked(state.env.storage, entry, event="branch_release")
    engine_state = ctx.engine_state.with_parked_holds(name, ())
    if engine_state.waiting is not None and engine_state.waiting.scope == name:
        engine_state = replace(engine_state, waiting=None)
    ctx.engine_state = engine_state


def _stopped(
    state: RunState, stop: _Stop, sibling_failures: list[RollbackFailure]
) -> Success | Failure | Paused:
    """Stop a concurrent execution, every branch settled, for its winning cause."""
    if stop.error is not None:
        if stop.branch is not None:  # its compensate is pending when its body started
            state.in_flight = stop.branch.state.in_flight
        raise stop.error
    if stop.outcome is not None and stop.branch is not None:
        spec, outcome = stop.branch.spec, stop.outcome
        result = outcome.result
        if isinstance(result, Halt):
            return _halt(state, spec.name, result, outcome)
        assert isinstance(result, Failure)
        return _fail(state, spec, outcome, also=sibling_failures)
    assert stop.request is not None
    return cancel.stop(state, stop.request, in_flight=None, coordinated=True)


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
    state: RunState,
    spec: StepSpec,
    outcome: StepOutcome,
    *,
    final: bool = False,
    started: float | None = None,
) -> StepOutcome | None:
    """Record a successful step and checkpoint; on an unstorable value return a failure.

    ``final``: no step runs after this one, so this checkpoint completes the run (status
    ``completed``, never throttled) instead of being followed by a checkpoint of its own.
    ``started``: a concurrent branch's start (epoch seconds), kept on its ``run`` trace entry
    so overlapping steps show (docs/concepts.md, "Concurrency").
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
    elif spec.kind == "sleep":  # woke: nothing to undo
        state.trace("woke", name)
    else:
        entry = outcome.undo_entry or UndoEntry(
            step=name, kind=spec.kind, arguments=outcome.arguments, result=result.value,
        )
        ctx.undo_stack.append(_with_secret_names(state, entry))
        pushed = True
        state.trace("run", name, attempt=ctx.attempts_of(name), started=started)
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


def _fail(
    state: RunState,
    spec: StepSpec,
    outcome: StepOutcome,
    *,
    also: list[RollbackFailure] | None = None,
) -> Failure:
    """Fail the run at step ``spec``: record the rollback (the step's compensate pending when
    its body started), checkpoint, and roll back (:func:`conclude_failure`). ``also``: the
    rollback failures already met (compensates of concurrent siblings that failed too)."""
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
    compensate_pending = outcome.body_started and spec.kind == "step"
    if failure_hold.pauses(state, spec):  # on_failure="pause" (docs/operations.md)
        held = failure_hold.hold(
            state, spec,
            replace(failure, rollback_failures=[*failure.rollback_failures, *(also or ())]),
            compensate_pending=compensate_pending,
        )
        if held is not None:
            return held
    rollback.begin(
        state,
        step=name,
        kind=spec.kind,
        arguments=outcome.arguments,
        compensate_pending=compensate_pending,
        failures=[*failure.rollback_failures, *(also or ())],
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

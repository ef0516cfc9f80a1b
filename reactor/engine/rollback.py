"""Compensation and undo: rolling a context back (docs/concepts.md, "Rollback").

1. The failing step is compensated **only if its body started** (``compensate_pending``).
2. Every completed step on the undo stack is undone **newest first**, across DAG branches (the
   stack is in completion order).
3. An entry is popped only **after** its undo returns, and the context is checkpointed after each
   pop, so an interrupted rollback resumes exactly where it stopped; a transactional step's
   undo writes in the transaction that checkpoint commits (:mod:`reactor.engine.step_transactions`).
4. An undo/compensate that returns a ``Failure`` or raises is recorded as a
   :class:`~reactor.model.results.RollbackFailure` and never stops the rest.

Compose and map steps roll back their children: a composed child's undo stack is replayed
(its failures flattened with the compose step's name as prefix); each completed map element's
stored context is loaded and its undo stack replayed, highest index first (failures carry
``map_step`` and ``element_index``); an ``async_reactor`` step's child run is loaded and its
undo stack replayed (docs/run-control.md, "async_reactor"). "Compensating" a compose or map
that was cut off by an interruption is the same work as undoing it; so is compensating an
``async_reactor`` step a cancel cut off (its child, when it completed, is undone; a child that
rolled itself back has nothing left).

A fan-out map is rolled back by :mod:`reactor.engine.maps.rollback` (docs/fan_out.md,
"Rollback"), whose element rollback replays each element's undo stack with
:func:`roll_back_child` here: the recursion is closed by a parameter, ``roll_back_fan_out``
(:class:`FanOutRollback`), that every entry point of this module takes and that its callers
fill with :func:`reactor.engine.maps.rollback.roll_back_fan_out` (docs/architecture.md,
"Layers").
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from reactor.dsl.definition import ReactorDefinition
from reactor.engine import coordination, invoke, liveness, observe, step_transactions
from reactor.engine.checkpoint import Checkpointer, load_context
from reactor.engine.env import Env
from reactor.engine.state import RunState
from reactor.errors import DeserializationError
from reactor.model.keys import child_run_id
from reactor.model.results import Failure, RollbackFailure
from reactor.model.run_records import RollbackState, UndoEntry
from reactor.model.status import RunStatus

__all__ = [
    "FanOutRollback",
    "begin",
    "compensate_sibling",
    "finish",
    "roll_back_child",
    "roll_back_elements",
    "undo_down_to",
]

_ROLLED_BACK_STATUSES = (RunStatus.COMPLETED, RunStatus.HALTED, RunStatus.ABORTED)


class FanOutRollback(Protocol):
    """Rolls back every started element of a fan-out map for its owner and returns the
    failures (:func:`reactor.engine.maps.rollback.roll_back_fan_out`; docs/fan_out.md,
    "Rollback")."""

    def __call__(
        self, state: RunState, step: str, map_id: str, *, kind: str = "undo"
    ) -> list[RollbackFailure]:
        """Roll back fan-out map ``map_id`` of step ``step`` of ``state``.

        Args:
            state: the owner's state (the map step's context).
            step: the map step.
            map_id: the map.
            kind: ``"undo"`` (a completed map) or ``"compensate"`` (a map cut off).

        Returns:
            The rollback failures, each with ``map_step``/``element_index``.

        Raises:
            reactor.engine.maps.rollback.RollbackHandedOff: the rollback was handed to
                element jobs and is not settled yet.
        """
        ...


def begin(
    state: RunState,
    *,
    step: str | None,
    kind: str | None,
    arguments: dict[str, Any] | None,
    compensate_pending: bool,
    failures: list[RollbackFailure] | None = None,
) -> None:
    """Record that a rollback starts (kept in the context, so it survives an interruption).

    The step's secret argument names are kept as ``"redacted"`` (sealed at rest, masked in
    views; docs/security.md, "What is encrypted").
    """
    args = dict(arguments or {})
    names = state.definition.secret_arguments(step, args, state.ctx.redacted) if step else []
    state.ctx.rollback = RollbackState(
        step=step,
        kind=kind,
        arguments=args,
        compensate_pending=compensate_pending,
        compensate_failed=False,
        failures=tuple(failures or ()),
        redacted=tuple(names) if names else None,
    )


def finish(state: RunState, *, roll_back_fan_out: FanOutRollback) -> list[RollbackFailure]:
    """Run the pending compensate, then undo the whole stack; return every rollback failure.

    Requires :func:`begin` to have been called (or a stored rollback to be in progress).

    Args:
        state: the context being rolled back.
        roll_back_fan_out: rolls back a fan-out map step found on the way
            (:func:`reactor.engine.maps.rollback.roll_back_fan_out`).

    Returns:
        Every rollback failure recorded so far (``ctx.rollback.failures``).

    Raises:
        reactor.engine.maps.rollback.RollbackHandedOff: a fan-out map's distributed rollback
            is not settled yet (the entries left are undone when the owner resumes).
    """
    with observe.rollback(state) as seen:  # docs/observability.md, "Middleware"
        failures = _finish(state, roll_back_fan_out)
        seen.done(failures)
        return failures


def _finish(state: RunState, roll_back_fan_out: FanOutRollback) -> list[RollbackFailure]:
    ctx = state.ctx
    if ctx.rollback is None:
        begin(state, step=None, kind=None, arguments=None, compensate_pending=False)
    rb = ctx.rollback
    assert rb is not None
    if rb.compensate_pending and rb.step:
        step = rb.step
        failures = _compensate(state, step, dict(rb.arguments), roll_back_fan_out)
        rb = ctx.rollback = replace(
            rb.with_failures(failures),
            compensate_failed=any(f.kind == "compensate" and f.step == step for f in failures),
            compensate_pending=False,
        )
        state.checkpoint.save()
    while ctx.undo_stack:
        entry = ctx.undo_stack[-1]
        try:
            rb = ctx.rollback = rb.with_failures(_undo(state, entry, roll_back_fan_out))
            ctx.undo_stack.pop()
            with step_transactions.committing(state):  # a transactional undo's writes
                state.checkpoint.save()
        finally:  # stopped before the pop's checkpoint: nothing of the undo commits
            step_transactions.discard(state)
    return list(rb.failures)


def undo_down_to(
    state: RunState, keep: int, *, roll_back_fan_out: FanOutRollback
) -> list[RollbackFailure]:
    """Undo the undo stack's newest entries, newest first, until ``keep`` entries are left:
    the part of a rollback a rewind runs for the steps it re-runs (docs/operations.md,
    "Pause, rewind, fork"). Each entry is popped only after its undo returned, and each pop
    is checkpointed, as in :func:`finish` (an interrupted call resumes where it stopped); a
    failing undo is recorded and the rest goes on.

    Args:
        state: the run (its liveness lock held by the caller).
        keep: how many of the oldest entries to leave (0: undo them all).
        roll_back_fan_out: rolls back a fan-out map step found on the way.

    Returns:
        The rollback failures of these undos.
    """
    ctx = state.ctx
    failures: list[RollbackFailure] = []
    while len(ctx.undo_stack) > keep:
        entry = ctx.undo_stack[-1]
        try:
            failures.extend(_undo(state, entry, roll_back_fan_out))
            ctx.undo_stack.pop()
            with step_transactions.committing(state):  # a transactional undo's writes
                state.checkpoint.save()
        finally:  # stopped before the pop's checkpoint: nothing of the undo commits
            step_transactions.discard(state)
    return failures


# ------------------------------------------------------------------------------ compensate


def compensate_sibling(
    state: RunState, step: str, arguments: dict[str, Any], failure: Failure
) -> list[RollbackFailure]:
    """Compensate leaf step ``step``, which failed in a concurrent group after a sibling's
    failure had already started the run's rollback (docs/concepts.md, "Concurrency"): its
    compensate runs at once, with its own ``failure``, before the rollback of the run.

    Args:
        state: the run.
        step: the failed step (a leaf step whose body started).
        arguments: the arguments its body saw.
        failure: its own failure (what its compensate receives).

    Returns:
        The rollback failure of a compensate that failed or could not take its holds, else
        ``[]``.
    """
    return _compensate(state, step, arguments, _no_fan_out, failure=failure)


def _no_fan_out(
    state: RunState, step: str, map_id: str, *, kind: str = "undo"
) -> list[RollbackFailure]:
    """A leaf step's compensate never meets a fan-out map."""
    raise AssertionError(f"step {step!r} is a leaf step: it has no fan-out map to roll back")


def _compensate(
    state: RunState,
    step: str,
    arguments: dict[str, Any],
    roll_back_fan_out: FanOutRollback,
    *,
    failure: Failure | None = None,
) -> list[RollbackFailure]:
    spec = state.definition.steps.get(step)
    if spec is None:
        return [_unknown_step(step, "compensate")]
    if spec.kind == "compose":
        return _undo_compose(state, step, roll_back_fan_out)
    if spec.kind == "map":
        return _undo_map_ref(state, step, roll_back_fan_out)
    if spec.kind == "async_reactor":  # cut off by a cancel: its child, when it completed
        child_id = child_run_id(state.ctx.context_id, step)
        return _undo_async_reactor(state, step, child_id, roll_back_fan_out, cut_off=True)
    rb = state.ctx.rollback
    interruption = (rb.interruption if rb is not None else None) or "an interruption"
    failure = failure or state.ctx.failure or Failure(
        f"step interrupted by {interruption}", retryable=False, step_name=step
    )
    with coordination.rollback_holds(state, spec, arguments, "compensate") as unavailable:
        if unavailable is not None:  # skipped, the rollback goes on
            state.trace("compensate_failure", step, detail=unavailable.message)
            return [unavailable]
        with observe.step(state, step, "compensate", arguments=arguments) as seen:
            invocation = invoke.call_compensate(
                spec, arguments, failure, state.step_context(step)
            )
            seen.done(invocation.result)
    if isinstance(invocation.result, Failure):
        state.trace("compensate_failure", step, detail=invocation.result.message)
        return [_failure_of(step, "compensate", invocation)]
    state.trace("compensate", step, detail=_skipped_detail(invocation, "compensate"))
    return []


# ------------------------------------------------------------------------------ undo


def _undo(
    state: RunState, entry: UndoEntry, roll_back_fan_out: FanOutRollback
) -> list[RollbackFailure]:
    step = entry.step
    spec = state.definition.steps.get(step)
    if spec is None:
        return [_unknown_step(step, "undo")]
    if spec.kind == "compose":
        return _undo_compose(state, step, roll_back_fan_out)
    if spec.kind == "async_reactor":
        child_id = str(entry.child_run_id)
        return _undo_async_reactor(state, step, child_id, roll_back_fan_out)
    if spec.kind == "map" and entry.fan_out:  # distributed or chunked
        failures = roll_back_fan_out(state, step, str(entry.map_id), kind="undo")
        state.trace("undo_failure" if failures else "undo", step)
        return failures
    if spec.kind == "map":
        elements = list(entry.elements or ())
        failures = roll_back_elements(
            state.env, state.definition.children[step], step, elements,
            roll_back_fan_out=roll_back_fan_out,
        )
        state.trace("undo_failure" if failures else "undo", step)
        return failures
    arguments = dict(entry.arguments)
    with coordination.rollback_holds(state, spec, arguments, "undo") as unavailable:
        if unavailable is not None:  # skipped, the rollback goes on
            state.trace("undo_failure", step, detail=unavailable.message)
            return [unavailable]
        with observe.step(state, step, "undo", arguments=arguments) as seen:
            invocation = step_transactions.run_body(  # kept for the pop's checkpoint
                state, spec, lambda transaction: invoke.call_undo(
                    spec, arguments, entry.result,
                    state.step_context(step, transaction=transaction),
                ),
            )
            seen.done(invocation.result)
    if isinstance(invocation.result, Failure):
        state.trace("undo_failure", step, detail=invocation.result.message)
        return [_failure_of(step, "undo", invocation)]
    state.trace("undo", step, detail=_skipped_detail(invocation, "undo"))
    return []


def _undo_compose(
    state: RunState, step: str, roll_back_fan_out: FanOutRollback
) -> list[RollbackFailure]:
    child = state.ctx.child(step)
    if child is None:
        return []
    child_state = RunState(state.definition.children[step], child, state.env, state.checkpoint)
    failures = roll_back_child(child_state, roll_back_fan_out=roll_back_fan_out)
    state.trace("undo_failure" if failures else "undo", step)
    return [f.nested(step) for f in failures]


def _undo_async_reactor(
    state: RunState, step: str, child_id: str, roll_back_fan_out: FanOutRollback,
    *, cut_off: bool = False,
) -> list[RollbackFailure]:
    """Undo a completed ``async_reactor`` step: replay its child run's stored undo stack
    (docs/run-control.md, "async_reactor"). A child already rolled back (``cancelled``,
    ``failed``) has nothing left to undo, so the child is undone once: its liveness lock is
    taken before its undo stack is read and held until its last save (docs/protocol.md,
    "Rollback jobs: lock before read"), so a ``Reactor.undo`` of the child racing this
    rollback never replays the same entries. ``cut_off``: the step was compensated after a
    cancel; a child that rolled itself back (the request passed on to it) reports its own
    rollback failures here, so the cancelled run's ``Failure`` lists them too."""
    env = state.env
    hold = liveness.take(env, child_id, wait=env.settings.context_lock_ttl)
    if hold is None:
        return [_child_unavailable(step, f"child run {child_id} is held by another execution")]
    try:
        try:
            child = load_context(env, child_id)
        except DeserializationError as exc:
            return [_child_unavailable(step, f"stored child run unreadable: {exc}")]
        if child is None:
            return [_child_unavailable(step, f"child run {child_id} not found")]
        failures: list[RollbackFailure] = []
        if child.status in _ROLLED_BACK_STATUSES:
            child_state = RunState(
                state.definition.children[step], child, env, Checkpointer(env, child)
            )
            undone = roll_back_child(child_state, roll_back_fan_out=roll_back_fan_out)
            failures = [f.nested(step) for f in undone]
        elif cut_off and child.status is RunStatus.CANCELLED and child.failure is not None:
            failures = [f.nested(step) for f in child.failure.rollback_failures]
    finally:
        hold.release()  # after the child's last save
    state.trace("undo_failure" if failures else "undo", step)
    return failures


def roll_back_child(
    state: RunState, *, roll_back_fan_out: FanOutRollback
) -> list[RollbackFailure]:
    """Finish the rollback of a child context (composed child, map element or
    ``async_reactor`` child run).

    A completed/halted/aborted child ends ``cancelled`` with a ``failure`` that keeps its
    rollback failures, saved in the same write; a failed one stays ``failed``. A child already
    ``cancelled`` (an earlier pass of the same rollback saved it, then a park or a crash cut the
    parent off before the parent's own save) is not replayed again: its stored failures are
    returned, so each is reported once (docs/concepts.md, "Rollback").

    Args:
        state: the child's state.
        roll_back_fan_out: rolls back a fan-out map step of the child (see :func:`finish`).

    Returns:
        The child's rollback failures.

    Raises:
        reactor.engine.maps.rollback.RollbackHandedOff: see :func:`finish`.
    """
    ctx = state.ctx
    if ctx.status is RunStatus.CANCELLED and ctx.rollback is None and not ctx.undo_stack:
        return list(ctx.failure.rollback_failures) if ctx.failure is not None else []
    failures = finish(state, roll_back_fan_out=roll_back_fan_out)
    ctx.rollback = None
    if ctx.status in _ROLLED_BACK_STATUSES:
        ctx.status = RunStatus.CANCELLED
        ctx.failure = Failure(
            f"{ctx.reactor} {ctx.context_id} was rolled back by its parent's rollback",
            retryable=False, reactor_name=ctx.reactor, rollback_failures=failures,
        )
    ctx.current_step = None
    state.checkpoint.save()
    return failures


def _undo_map_ref(
    state: RunState, step: str, roll_back_fan_out: FanOutRollback
) -> list[RollbackFailure]:
    ref = state.ctx.map_ref(step)
    if ref is None:
        return []
    if ref.is_fan_out:  # a fan-out map cut off mid-flight: roll back what started
        return roll_back_fan_out(state, step, ref.map_id, kind="compensate")
    elements = sorted(ref.elements.items())
    return roll_back_elements(
        state.env, state.definition.children[step], step, elements,
        roll_back_fan_out=roll_back_fan_out,
    )


def roll_back_elements(
    env: Env,
    element_definition: ReactorDefinition,
    map_step: str,
    elements: list[tuple[int, str]],
    *,
    roll_back_fan_out: FanOutRollback,
) -> list[RollbackFailure]:
    """Roll back map elements, highest index first, replaying each element's undo stack.

    Args:
        env: the execution environment.
        element_definition: the element reactor's definition.
        map_step: the map step's name (set on the failures).
        elements: ``(index, context_id)`` of the elements to roll back.
        roll_back_fan_out: rolls back a fan-out map step of an element (see :func:`finish`).

    Returns:
        The failures, each with ``map_step`` and ``element_index`` set.

    Raises:
        reactor.engine.maps.rollback.RollbackHandedOff: see :func:`finish`.
    """
    failures: list[RollbackFailure] = []
    for index, context_id in sorted(elements, reverse=True):
        try:
            element_ctx = load_context(env, context_id)
        except DeserializationError as exc:
            failures.append(_unavailable(map_step, index, f"stored context unreadable: {exc}"))
            continue
        if element_ctx is None:
            failures.append(_unavailable(map_step, index, f"context {context_id} not found"))
            continue
        element_state = RunState(
            element_definition, element_ctx, env, Checkpointer(env, element_ctx)
        )
        failures.extend(
            f.in_map(map_step, index)
            for f in roll_back_child(element_state, roll_back_fan_out=roll_back_fan_out)
        )
    return failures


# ------------------------------------------------------------------------------ helpers


def _failure_of(step: str, kind: str, invocation: invoke.Invocation) -> RollbackFailure:
    result = invocation.result
    assert isinstance(result, Failure)
    reason = "raised" if invocation.raised else "returned_failure"
    message = result.message
    if invocation.raised and result.exception_class:
        message = f"{result.exception_class}: {message}"
    return RollbackFailure(
        step=step,
        kind="undo" if kind == "undo" else "compensate",
        reason=reason,
        message=message,
    )


def _skipped_detail(invocation: invoke.Invocation, hook: str) -> str | None:
    """``"skipped"`` when the hook returned ``Skipped`` (e.g. no undo/compensate written)."""
    return f"{hook} skipped (nothing to roll back)" if invocation.result.skipped else None


def _unknown_step(step: str, kind: str) -> RollbackFailure:
    return RollbackFailure(
        step=step,
        kind="undo" if kind == "undo" else "compensate",
        reason="unknown_step",
        message=f"step {step!r} is not declared by this reactor (definition changed?)",
    )


def _child_unavailable(step: str, message: str) -> RollbackFailure:
    return RollbackFailure(step=step, kind="undo", reason="context_unavailable", message=message)


def _unavailable(map_step: str, index: int, message: str) -> RollbackFailure:
    return RollbackFailure(
        step=map_step,
        kind="undo",
        reason="context_unavailable",
        message=message,
        map_step=map_step,
        element_index=index,
    )


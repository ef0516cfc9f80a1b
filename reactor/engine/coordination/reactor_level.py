"""The reactor-level coordination around the executor (docs/coordination.md, "Order"):
:func:`run_coordinated` and :func:`assign_ordered_ticket`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from reactor.coordination.ordered_lock import OrderedLock
from reactor.dsl.coordination import (
    OrderedLockDecl,
)
from reactor.engine.coordination.admission import mark_admitted
from reactor.engine.coordination.holds import (
    refused_loss,
)
from reactor.engine.coordination.keys import REACTOR_SCOPE, root_id
from reactor.engine.coordination.unit import Unit
from reactor.engine.parks import Park
from reactor.engine.run_control import deadline
from reactor.errors import (
    CoordinationKeyError,
)
from reactor.model.engine_state import KeyedTicket
from reactor.model.results import (
    Failure,
    Halt,
    Paused,
    Result,
    RollbackFailure,
    Success,
)
from reactor.model.status import RunStatus

if TYPE_CHECKING:
    from reactor.dsl.definition import ReactorDefinition
    from reactor.engine.env import Env
    from reactor.engine.state import RunState
    from reactor.model.context import Context

log = logging.getLogger("reactor.coordination")


#: Run statuses after which the reactor-level ordered cursor advances (``cancelled``: a cancel
#: noticed at a step boundary, docs/run-control.md, "Cancel"; it never poisons a strict chain).
_TERMINAL = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.HALTED, RunStatus.CANCELLED)


_REACTOR_ORDER = ("ordered", "period", "rate", "lock", "semaphore", "period_recheck")


def run_coordinated(
    state: RunState,
    body: Callable[[RunState], Success | Failure | Paused],
    *,
    roll_back: Callable[[RunState], list[RollbackFailure]],
) -> Success | Failure | Paused:
    """Run ``body(state)`` (the executor) inside the reactor's coordination.

    See the module docstring for the order. A ``Park`` raised by the coordination itself or by
    a step detaches the reactor-level holds, records them and **saves** the context before it
    propagates (also when the reactor declares no coordination).

    Args:
        state: the run being executed (inputs already validated).
        body: runs the steps and returns the run's result.
        roll_back: rolls back the steps the run already completed and returns the rollback
            failures, when the coordination fails a run that has an undo stack (a re-entry
            after a hand-off; docs/concepts.md, "Rollback"). The executor passes it: rolling
            back runs step code, which runs under this module's holds.

    Returns:
        The body's result, or the ``Halt``/``Failure`` the coordination produced instead (the
        context is then stored ``halted``/``failed``; a run with completed steps, e.g. a
        re-entry after a hand-off, is rolled back first). A ``Paused`` body (an interrupt:
        docs/run-control.md, "Interrupts") releases the holds like a hand-off: a resume
        takes them again.

    Raises:
        Park: in a worker, on contention.
    """
    decls = state.definition.coordination
    if not decls:
        try:
            return body(state)
        except Park:
            state.checkpoint.save()
            raise
    ctx = state.ctx
    env = state.env
    unit = Unit(
        decls, storage=env.storage, settings=env.settings, clock=env.clock,
        owner=root_id(ctx),
        mode="worker" if env.in_worker else "sync", scope=REACTOR_SCOPE,
        default_key=state.definition.name, inputs=ctx.inputs, target=ctx,
        context_id=ctx.context_id, step=None, hooks=env.runtime.hooks,
        deadline=deadline.governing(state),
    )
    first_run = not ctx.engine_state.admitted
    try:
        early = unit.enter(_REACTOR_ORDER, first_run=first_run)
    except Park as park:
        state.trace("contention_park", None, detail=f"{park.reason} {park.key or ''}".strip())
        state.checkpoint.save()
        raise
    if early is not None:
        return _stop_before_steps(state, unit, early, roll_back)
    mark_admitted(ctx)
    parked = False
    outer = state.holds
    state.holds = outer + unit.views("reactor")
    try:
        result = body(state)
        unit.mark_period(result)
        return result
    except Park:
        parked = True
        unit.park()
        state.checkpoint.save()
        raise
    finally:
        state.holds = outer
        if not parked:
            held = list(unit.held)
            unit.release()
            refused = refused_loss(held)
            if refused is not None:  # after the final save: reported, the steps were checked
                log.warning("event=hold_lost run_id=%s scope=reactor %s", ctx.context_id,
                            refused)
            if ctx.status in _TERMINAL:
                unit.finish_ordered(failed=ctx.status is RunStatus.FAILED)
            else:
                unit.leave_ordered()


def _stop_before_steps(
    state: RunState,
    unit: Unit,
    early: Result,
    roll_back: Callable[[RunState], list[RollbackFailure]],
) -> Success | Failure:
    """Store and return the ``Halt``/``Failure`` the coordination produced before any step
    (a run with completed steps is rolled back first, with ``roll_back``)."""
    ctx = state.ctx
    ctx.current_step = None
    if isinstance(early, Halt):
        state.trace("halt", None, detail=str(early.reason))
        ctx.status = RunStatus.HALTED
        unit.finish_ordered(failed=False)
        state.checkpoint.save()
        return early
    assert isinstance(early, Failure)
    failure = replace(
        early, reactor_name=state.definition.name, inputs=ctx.redacted_inputs(), run_id=None
    )
    state.trace("failed", None, detail=failure.message)
    ctx.failure = failure
    if ctx.undo_stack:
        failure = replace(failure, rollback_failures=roll_back(state))
        ctx.failure = failure
        ctx.rollback = None
    ctx.status = RunStatus.FAILED
    # Nothing ran under the ticket: advance without poisoning a strict chain.
    unit.finish_ordered(failed=False)
    state.checkpoint.save()
    return failure


def assign_ordered_ticket(definition: ReactorDefinition, ctx: Context, env: Env) -> None:
    """Take the run's place in its reactor-level ordered lock now (at enqueue time).

    A background run is given its ticket by the caller (``docs/coordination.md``, "Ordered
    locks in workers"), before the context is saved and enqueued, so runs go in enqueue
    order. Without this call the ticket is
    assigned when the run first executes (a synchronous run). A no-op when the reactor declares
    no ordered lock, the ticket exists, or the key cannot be computed yet (the execution then
    fails on it).

    Args:
        definition: the reactor's definition.
        ctx: the run's context (``inputs`` set; the ticket is stored in
            ``EngineState.ordered_ticket``).
        env: the execution environment.
    """
    decl = next((d for d in definition.coordination if isinstance(d, OrderedLockDecl)), None)
    if decl is None or ctx.engine_state.ordered_ticket is not None:
        return
    try:
        key = decl.resolve_key(ctx.inputs, definition.name)
    except CoordinationKeyError:
        return
    ticket = OrderedLock(env.storage.ordered_locks, key, ttl=decl.ttl).assign()
    ctx.engine_state = replace(ctx.engine_state, ordered_ticket=KeyedTicket.of(key, ticket))

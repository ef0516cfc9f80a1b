"""Carrying a cancel out: compensating the step in flight, undoing the completed steps,
releasing the holds kept on the record and storing the run ``cancelled``
(docs/run-control.md, "Cancel"); ``failed`` with ``RunDeadlineExceeded`` when the request is
a passed deadline's (docs/concepts.md, "Run deadlines").
"""

import logging
from dataclasses import replace

from reactor.dsl.coordination import Coordination, OrderedLockDecl
from reactor.dsl.definition import ReactorDefinition
from reactor.engine import coordination, rollback
from reactor.engine.env import Env
from reactor.engine.maps.rollback import roll_back_fan_out
from reactor.engine.run_control import deadline
from reactor.engine.run_control.cancel.requests import (
    cancelled_failure,
)
from reactor.engine.state import InFlight, RunState
from reactor.errors import (
    ContextTooLargeError,
    EncodeError,
)
from reactor.model.context import Context
from reactor.model.engine_state import CancelRequest
from reactor.model.results import Failure, RollbackFailure
from reactor.model.status import RunStatus

log = logging.getLogger("reactor.cancel")



#: Seconds an ordered-lock ``first_failed`` marker would live when the declaration is gone.
_DEFAULT_ORDERED_TTL = 86400.0

#: Statuses of an embedded child that the cancel ends (it will never continue).
_UNFINISHED = (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.PAUSED)



def stop(
    state: RunState, request: CancelRequest, *, in_flight: InFlight | None, coordinated: bool,
    failures: list[RollbackFailure] | None = None,
) -> Failure:
    """Carry out ``request`` on the root run of ``state``: record it, roll back (when asked),
    release the stored holds and store the run ``cancelled`` (see the module docstring).

    Args:
        state: the root run, held by this execution (its liveness lock).
        request: the cancel request.
        in_flight: the step cut off (compensated when its body started), or ``None``.
        coordinated: ``True`` inside the run's reactor-level coordination (which releases
            those holds itself); ``False`` for a stored run (its parked holds and tickets are
            released here).
        failures: rollback failures already met (a composed child or a map the deadline
            stopped rolled itself back), kept with the rollback's own.

    Returns:
        The cancelled run's ``Failure`` (without ``run_id``), already saved.

    Raises:
        RollbackHandedOff: a fan-out map's rollback was handed to element jobs (in a worker).
        StorageError, LockLost: a backend failed, or the run is not this execution's any more.
    """
    ctx = state.ctx
    state.in_flight = None
    pending = ctx.engine_state.interrupt
    if pending is not None and pending.correlation_id is not None:
        release_correlation(state.env, ctx.context_id, pending.correlation_id)
    ctx.engine_state = replace(ctx.engine_state, cancel=request, interrupt=None, waiting=None)
    step = in_flight.step if in_flight is not None else None
    state.trace("deadline" if request.cause == "deadline" else "cancelled", step,
                detail=request.reason)
    ctx.failure = cancelled_failure(ctx, request, [])  # what a compensate is handed
    if request.rollback:
        started = in_flight is not None and in_flight.body_started
        # From here on a crash leaves a ``running`` run with its rollback intent: the run
        # sweeper hands it to a worker, which finishes the cancel (conclude_failure, conclude).
        ctx.status = RunStatus.RUNNING
        rollback.begin(
            state,
            step=step,
            kind=in_flight.kind if in_flight is not None else None,
            arguments=in_flight.arguments if in_flight is not None else None,
            compensate_pending=started,
            failures=failures,
        )
        try:  # the rollback intent survives a crash: the run is then cancelled, not resumed
            state.checkpoint.save()
        except (EncodeError, ContextTooLargeError):
            pass  # the final save reports it; the rollback must run regardless
    return conclude(state, coordinated=coordinated)


def conclude(state: RunState, *, coordinated: bool = False) -> Failure:
    """Finish a cancel whose request is kept on the run (``EngineState.cancel``): the
    rollback recorded (if any), the stored holds, then the ``cancelled`` status.

    Called by :func:`stop`, and by :func:`reactor.engine.executor.conclude_failure` when a
    worker resumes a run whose cancel rollback was handed to map element jobs or cut off by
    a crash.

    Args:
        state: the root run, held by this execution.
        coordinated: see :func:`stop`.

    Returns:
        The cancelled run's ``Failure`` (without ``run_id``), already saved.

    Raises:
        RollbackHandedOff: a fan-out map's rollback was handed to element jobs (in a worker).
        StorageError, LockLost: a backend failed, or the run is not this execution's any more.
    """
    ctx = state.ctx
    request = ctx.engine_state.cancel or CancelRequest()
    failures: list[RollbackFailure] = []
    if ctx.rollback is not None:
        failures = rollback.finish(state, roll_back_fan_out=roll_back_fan_out)
    if not coordinated:
        _release_stored_holds(state.env, state.definition, ctx)
    _end_children(ctx)
    ctx.rollback = None
    # a deadline's stop ends the run failed (docs/concepts.md, "Run deadlines")
    by_deadline = request.cause == "deadline"
    ctx.status = RunStatus.FAILED if by_deadline else RunStatus.CANCELLED
    ctx.current_step = None
    failure = cancelled_failure(ctx, request, failures, deadline=deadline.governing(state))
    ctx.failure = failure
    state.checkpoint.save()
    log.info("event=%s run_id=%s rolled_back=%s rollback_failures=%d",
             "run_deadline_exceeded" if by_deadline else "run_cancelled",
             ctx.context_id, request.rollback, len(failures))
    return failure


def _end_children(ctx: Context) -> None:
    """Mark embedded children that will never continue (``running``/``pending``/``paused``)
    ``cancelled``, recursively."""
    for child in ctx.composed_contexts.values():
        if isinstance(child, Context):
            if child.status in _UNFINISHED:
                child.status = RunStatus.CANCELLED
                child.current_step = None
            _end_children(child)


def release_correlation(env: Env, run_id: str, correlation_id: str) -> None:
    """Free a correlation id the cancelled run registered (best effort: a stale mapping is
    detected and replaced when the id is used again; docs/run-control.md, "Interrupts")."""
    try:
        env.storage.claims.release_correlation_id(correlation_id)
    except Exception as exc:
        log.warning("event=correlation_not_released run_id=%s error=%s", run_id, exc)


def _release_stored_holds(env: Env, definition: ReactorDefinition, ctx: Context) -> None:
    """Release what the stored run (and its embedded children) keeps between executions:
    parked locks and semaphore leases are released, ordered-lock tickets advanced (without
    poisoning a strict chain; docs/coordination.md, "Contention"). Best effort: a refused
    or failed release only lets the hold lapse with its TTL (logged)."""
    state = ctx.engine_state
    storage = env.storage
    for holds in state.parked_holds.values():
        for hold in holds:
            coordination.release_parked(storage, hold, event="cancel_release")
    tickets = [(state.ordered_ticket, definition.coordination)] if state.ordered_ticket else []
    for step, ticket in state.step_ordered_tickets.items():
        spec = definition.steps.get(step)
        tickets.append((ticket, spec.coordination if spec is not None else ()))
    for keyed, decls in tickets:
        assert keyed is not None
        try:
            storage.ordered_locks.advance(
                keyed.key, keyed.ticket, failed=False, ttl=_ordered_ttl(decls)
            )
        except Exception as exc:
            log.warning("event=cancel_release_failed run_id=%s key=%s error=%s",
                        ctx.context_id, keyed.key, exc)
    ctx.engine_state = replace(
        state, parked_holds={}, ordered_ticket=None, step_ordered_tickets={}, waiting=None,
    )
    for name, child in ctx.composed_contexts.items():
        if isinstance(child, Context) and name in definition.children:
            _release_stored_holds(env, definition.children[name], child)


def _ordered_ttl(decls: tuple[Coordination, ...]) -> float:
    """The ``ttl`` of the ordered-lock declaration among ``decls`` (seconds)."""
    for decl in decls:
        if isinstance(decl, OrderedLockDecl):
            return float(decl.ttl)
    return _DEFAULT_ORDERED_TTL

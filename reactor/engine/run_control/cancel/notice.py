"""Noticing a cancel request where a root run executes: before a continued execution starts
(:func:`at_start`), before a step (:func:`before_step`) and at each step boundary
(:func:`at_boundary`, :func:`stop_at_boundary`) (docs/run-control.md, "Cancel"); a passed
run deadline is noticed at the same places (:func:`overdue`; docs/concepts.md, "Run
deadlines").
"""

import logging
from collections.abc import Callable

from reactor.dsl.declarations import StepSpec
from reactor.engine.maps.fan_out import MapDispatched
from reactor.engine.parks import Park, park_delay
from reactor.engine.run_control import deadline
from reactor.engine.run_control.cancel.conclusion import release_correlation, stop
from reactor.engine.run_control.cancel.in_flight import (
    hold_for_child,
    hold_for_map,
    stored_in_flight,
)
from reactor.engine.run_control.cancel.requests import (
    claim,
    decoded_request,
    is_root,
)
from reactor.engine.state import InFlight, RunState
from reactor.engine.step_runner import StepOutcome
from reactor.errors import (
    RunCancelledError,
)
from reactor.model.engine_state import CancelRequest
from reactor.model.keys import (
    CANCEL_CLAIM_PATH,
    FIRST_SUSPEND_CLAIM_PATH,
    child_run_id,
    suspend_claim_path,
)
from reactor.model.results import Failure, Halt, Paused, Result, Success
from reactor.model.status import RunStatus

log = logging.getLogger("reactor.cancel")


#: ``Failure.exception_class`` of a run that a cancel ended.
_CANCELLED_CLASS = f"{RunCancelledError.__module__}.{RunCancelledError.__qualname__}"




def at_start(state: RunState) -> Failure | None:
    """Check for a cancel request before an execution continues a stored root run.

    Called by :func:`reactor.engine.executor.execute` before the reactor-level coordination,
    for every execution that continues a stored root run (a worker's ``run`` job, whether
    handed off, re-dispatched by the run sweeper after its worker died, resumed by a map's
    collector or coming back from a park; an inline resume): a request accepted while an
    earlier execution owned the run (which may have died before its next boundary read it)
    is carried out before any further step runs and without taking the run's holds again.
    A fresh run (not stored yet) is not checked: nobody can have asked to cancel it. The
    request is the one the store read with the run's load (:attr:`RunState.claims_read`, a
    :class:`~reactor.ports.capabilities.ReadsClaimsWhenTaking` store: no request of its
    own), else one claims-store read per execution, not per step.

    Args:
        state: the execution (any context; only a root run stored ``running`` is checked).

    Returns:
        The cancelled run's ``Failure`` (the run is stored ``cancelled``), or ``None`` when
        no cancel was requested: execute the run.

    Raises:
        MapDispatched: a fan-out map in flight must settle first (see :func:`hold_for_map`).
        RollbackHandedOff: the rollback of a fan-out map was handed to element jobs (in a
            worker).
        StorageError, LockLost: a backend failed, or the run is not this execution's any more.
    """
    ctx = state.ctx
    state.cancel_checked_at = state.env.clock.monotonic()  # the boundaries' interval starts
    if is_root(state):  # each incremental checkpoint reads the requests where it can
        state.checkpoint.noting = (CANCEL_CLAIM_PATH, _suspend_path(state))
    if ctx.status is not RunStatus.RUNNING or not is_root(state) or ctx.persisted is None:
        return None
    known, state.claims_read = state.claims_read, None  # fresh for this start only
    if known is not None:  # read with the load that started this execution (no request)
        request = decoded_request(ctx.context_id, known.get(CANCEL_CLAIM_PATH))
        path = _suspend_path(state)
        if path == FIRST_SUSPEND_CLAIM_PATH:  # read with the load (jobs/handlers/run.py)
            state.suspend_claim = known.get(path)
        else:  # a run unsuspended before: its path is read on its own
            state.suspend_claim = state.env.storage.claims.interrupt_resumes(
                ctx.context_id, [path]
            ).get(path)
    else:
        request = _read(state)
    if request is None:
        request = overdue(state)
    if request is None:
        return None
    in_flight = stored_in_flight(state)
    if hold_for_map(state, request, in_flight):
        assert in_flight is not None
        ref = ctx.map_ref(in_flight.step)
        assert ref is not None
        raise MapDispatched(ctx.context_id, ctx.reactor, in_flight.step, ref.map_id)
    if hold_for_child(state, request, in_flight) and state.env.in_worker:
        assert in_flight is not None  # the child was handed the cancel: wait for it to end
        raise Park(delay=park_delay(state.env.settings), reason="async_wait",
                   key=child_run_id(ctx.context_id, in_flight.step), step=in_flight.step)
    log.info("event=cancel_noticed run_id=%s at=start", ctx.context_id)
    return stop(state, request, in_flight=in_flight, coordinated=False)


def at_boundary(state: RunState, result: Result, *, kind: str = "step") -> CancelRequest | None:
    """Check for a cancel request at a step boundary: after a step's body returned, before
    its result is recorded.

    Args:
        state: the execution (only a root run is checked, except for a deadline).
        result: the step's result; only a ``Success`` (a ``Skipped`` too, never a ``Halt``)
            or a ``Paused`` is checked: a failure or a halt ends the run as it would have,
            except a compose or map step whose child or element the deadline stopped
            (:class:`~reactor.errors.RunDeadlineExceeded`): the run's own deadline's request
            is returned then (a composed child's or an element's too).
        kind: the step's kind.

    Returns:
        The request to carry out (:func:`stop_at_boundary`), or ``None``: go on.

    Raises:
        StorageError: the claims store failed.
    """
    if kind == "async_reactor" and is_root(state):
        # the wait for a child may have outlasted a cancel of this run, which was passed on
        # to the child (the child ended cancelled, or completed before it read it): always
        # read, whatever the interval, so the run stops here and undoes a completed child
        state.cancel_checked_at = state.env.clock.monotonic()
        request = _read(state)
        if request is not None or _child_cancelled(result):
            return request
    if (isinstance(result, Failure) and kind in ("compose", "map")
            and result.exception_class == deadline.EXCEEDED_CLASS):
        # the child or the map's element stopped itself at the deadline (rolled back): the
        # deadline stops this run here too (docs/concepts.md, "Run deadlines")
        return overdue(state)
    if isinstance(result, Halt | Failure) or not isinstance(result, Success | Paused):
        return None
    if not is_root(state):
        return None
    noted = before_step(state)  # what the last checkpoint's reply said
    if noted is not None:
        return noted
    now = state.env.clock.monotonic()
    last = max(
        (t for t in (state.cancel_checked_at, state.checkpoint.noted_at) if t is not None),
        default=None,
    )
    if last is not None and now - last < state.env.settings.cancel_check_interval:
        return None  # read less than cancel_check_interval ago (or the execution started)
    state.cancel_checked_at = now
    return _read(state)


def _suspend_path(state: RunState) -> str:
    """The claim path of the run's next suspend request (docs/operations.md)."""
    return suspend_claim_path(state.ctx.engine_state.suspend_generation)


def _read(state: RunState) -> CancelRequest | None:
    """Read the run's cancel request, and its suspend request with it (one claims-store
    request; a suspend request found is kept as :attr:`RunState.suspend_claim`)."""
    path = _suspend_path(state)
    run_id = state.ctx.context_id
    found = state.env.storage.claims.interrupt_resumes(run_id, [CANCEL_CLAIM_PATH, path])
    if found.get(path) is not None:
        state.suspend_claim = found[path]
    return decoded_request(run_id, found.get(CANCEL_CLAIM_PATH))


def before_step(state: RunState) -> CancelRequest | None:
    """The cancel request the run's last incremental checkpoint read with its write (a
    :class:`~reactor.ports.capabilities.ReadsClaimsWhenAppending` store), checked before each
    step starts: no request of its own (docs/run-control.md, "Cancel"); else the stop
    request of a passed deadline (:func:`overdue`).

    Args:
        state: the execution.

    Returns:
        The request, or ``None`` (none read, or the store does not read claims with its
        appends: :func:`at_boundary` reads them then; no deadline passed).

    Raises:
        StorageError: the claims store failed (claiming a deadline's request).
    """
    if not is_root(state):  # a composed child or a map element: its root's deadline only
        return overdue(state)
    checkpoint = state.checkpoint
    if checkpoint.noted_at is not None:
        suspend = checkpoint.noted.get(_suspend_path(state))
        if suspend is not None:
            state.suspend_claim = suspend
        noted = decoded_request(state.ctx.context_id, checkpoint.noted.get(CANCEL_CLAIM_PATH))
        if noted is not None:
            return noted
    return overdue(state)


def overdue(state: RunState) -> CancelRequest | None:
    """The stop request of a run whose governing deadline has passed (docs/concepts.md, "Run
    deadlines"; :func:`reactor.engine.run_control.deadline.governing`): a root run's is
    claimed as its cancel request (first writer wins: an earlier ``Reactor.cancel`` stands
    instead); a composed child or a map element stops itself with the deadline's request,
    unclaimed (its root claims it at the boundary after the compose or map step).

    Args:
        state: the execution (no store request before the deadline passed).

    Returns:
        The request to carry out, or ``None`` (no deadline, or not passed).

    Raises:
        StorageError: the claims store failed.
    """
    ctx = state.ctx
    deadline_at = deadline.passed(state)
    if deadline_at is None:
        return None
    now = state.env.now()
    log.info("event=deadline_passed run_id=%s deadline=%s", ctx.context_id,
             deadline.shown(deadline_at))
    request = deadline.deadline_request(deadline_at, now)
    if not is_root(state):  # its root claims the request when it notices (at its boundary)
        return request
    return claim(state.env, ctx.context_id, request)


def _child_cancelled(result: Result) -> bool:
    """Whether ``result`` is an ``async_reactor`` child's end by a cancel."""
    return isinstance(result, Failure) and result.exception_class == _CANCELLED_CLASS


def stop_at_boundary(
    state: RunState,
    spec: StepSpec,
    outcome: StepOutcome,
    request: CancelRequest,
    *,
    record: Callable[[], object],
) -> Failure:
    """Cancel the run at the boundary after step ``spec`` (see :func:`at_boundary`).

    With ``rollback=True`` the step is treated as cut off: not recorded, compensated when its
    body started (a compose step or a map rolls its children back), then the completed steps
    are undone. A compose or map step that failed because the deadline stopped its child or
    element rolled itself back already: it is not compensated, its rollback failures are
    kept. With ``rollback=False`` a step that completed is recorded first (``record``, the
    executor's own recording), and nothing is rolled back.

    Args:
        state: the root run's execution (inside its reactor-level coordination, which
            releases those holds and advances its ordered ticket when the run ends).
        spec: the step that just returned.
        outcome: what it returned (a ``Success`` or a ``Paused``; a compose or map step's
            ``Failure`` of :class:`~reactor.errors.RunDeadlineExceeded`).
        request: the cancel request.
        record: records the completed step and checkpoints (the executor's ``_record``).

    Returns:
        The cancelled run's ``Failure`` (stored ``cancelled``).

    Raises:
        RollbackHandedOff: a fan-out map's rollback was handed to element jobs (in a worker;
            the resumed run finishes the cancel: :func:`conclude`).
        StorageError, LockLost: a backend failed, or the run is not this execution's any more.
    """
    result = outcome.result
    log.info("event=cancel_noticed run_id=%s at=%s", state.ctx.context_id, spec.name)
    if isinstance(result, Paused) and result.correlation_id is not None:
        release_correlation(state.env, state.ctx.context_id, result.correlation_id)
    if not request.rollback and isinstance(result, Success):
        record()  # an unstorable value is not recorded: nothing is rolled back either way
        return stop(state, request, in_flight=None, coordinated=True)
    if isinstance(result, Failure):  # a child or a map the deadline stopped: rolled back
        return stop(state, request, in_flight=None, coordinated=True,
                    failures=list(result.rollback_failures))
    in_flight = None
    if spec.kind in ("step", "compose", "map", "async_reactor"):
        in_flight = InFlight(spec.name, spec.kind, dict(outcome.arguments),
                             body_started=outcome.body_started)
    return stop(state, request, in_flight=in_flight, coordinated=True)



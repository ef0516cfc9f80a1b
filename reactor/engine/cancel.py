"""Cancelling a run where it executes: the cancel request, noticing it at a step boundary, and
carrying it out (docs/run-control.md, "Cancel").

**The request.** ``Reactor.cancel`` (:mod:`reactor.engine.cancel_run`) records a
:class:`~reactor.model.engine_state.CancelRequest` (``reason``, ``rollback``,
``requested_at``) as a first-writer-wins claim of the root run in the claims store, under the
reserved step path :data:`CANCEL_CLAIM_PATH` (``ClaimStore.claim_interrupt_resume``: one Lua
script on Redis, a conditional write on the document stores; no interrupt step can have this
path, a step name being an identifier). The claim is durable and atomic on every backend, and
the first request wins: a second cancel finds it and changes nothing.

**Noticing it.** An executing root run reads the claim with one
``ClaimStore.interrupt_resumes`` request:

* :func:`at_start`: whenever an execution continues a stored run (any worker's ``run`` job,
  including one the run sweeper re-dispatched after the owning worker died; an inline
  resume), before it takes its reactor-level coordination and before any further step;
* :func:`at_boundary`: after each step's body returned a ``Success`` (or reached an
  interrupt), before its result is recorded. A step that failed or halted ends the run as it
  would have (a failure rolls back, a halt keeps the progress).

Composed children and map elements are not checked: their root is, at its own boundaries.
An ``async_reactor`` child is a run of its own and checks its own request; a cancel of its
parent passes the request down to it (:func:`hold_for_child`) and waits for it to end.

**Carrying it out** (:func:`stop`, then :func:`conclude`). The request is kept on the run
(``EngineState.cancel``, saved with the rollback intent so a crash resumes the cancel, never
the run). With ``rollback=True`` the step in flight is compensated when its body started (the
step whose boundary noticed the cancel, a composed child or a map cut off, a leaf step
waiting for a retry), then every completed step is undone once, newest first, as after a
failure (:mod:`reactor.engine.rollback`; a fan-out map's elements through
:mod:`reactor.engine.map_rollback`). With ``rollback=False`` nothing is rolled back: a step
that completed at the boundary is recorded, the undo stack is kept (``Reactor.undo`` rolls it
back later). Either way the holds the run keeps on its record are released (parked locks and
semaphore leases; ordered-lock tickets are advanced without poisoning a strict chain), a
paused run's correlation id is freed, and the run is stored ``cancelled`` with a ``Failure``
of :class:`~reactor.errors.RunCancelledError` carrying the reason and the rollback failures.
A fan-out map in flight stops dispatching (its pending elements skip themselves); while
elements still run, the run waits for the map to settle (:func:`hold_for_map`) and its
resumed execution rolls the elements back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from reactor.dsl.coordination import Coordination, OrderedLockDecl
from reactor.dsl.declarations import StepSpec
from reactor.dsl.definition import ReactorDefinition
from reactor.engine import coordination, liveness, rollback
from reactor.engine.arguments import resolve_arguments
from reactor.engine.checkpoint import Checkpointer, load_context
from reactor.engine.dispatch import publish_completion
from reactor.engine.env import Env
from reactor.engine.fan_out import CANCEL_CLAIM_PATH, MapDispatched, is_fan_out_ref
from reactor.engine.liveness import Liveness
from reactor.engine.map_rollback import roll_back_fan_out
from reactor.engine.parks import Park, park_delay
from reactor.engine.state import InFlight, RunState
from reactor.engine.step_runner import StepOutcome
from reactor.errors import (
    ArgumentResolutionError,
    ContextTooLargeError,
    DeserializationError,
    EncodeError,
    RunCancelledError,
)
from reactor.model.context import Context
from reactor.model.engine_state import CancelRequest
from reactor.model.keys import child_run_id
from reactor.model.records import Fence
from reactor.model.results import Failure, Halt, Paused, Result, RollbackFailure, Success
from reactor.model.status import TERMINAL_STATUSES, RunStatus

__all__ = [
    "CANCEL_CLAIM_PATH",
    "HolderCheckpointer",
    "at_boundary",
    "at_start",
    "before_step",
    "cancel_stored",
    "cancelled_failure",
    "claim",
    "conclude",
    "hold_for_child",
    "hold_for_map",
    "is_root",
    "requested",
    "stop",
    "stop_at_boundary",
    "stored_in_flight",
]

log = logging.getLogger("reactor.cancel")


#: Seconds an ordered-lock ``first_failed`` marker would live when the declaration is gone.
_DEFAULT_ORDERED_TTL = 86400.0

#: Statuses of an embedded child that the cancel ends (it will never continue).
_UNFINISHED = (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.PAUSED)
#: ``Failure.exception_class`` of a run that a cancel ended.
_CANCELLED_CLASS = f"{RunCancelledError.__module__}.{RunCancelledError.__qualname__}"


# ------------------------------------------------------------------------------ the request


def requested(env: Env, run_id: str) -> CancelRequest | None:
    """The cancel request recorded for root run ``run_id``, if any (one claims-store read).

    Args:
        env: the execution environment.
        run_id: the root run.

    Returns:
        The request; ``None`` when nobody asked to cancel the run. An unreadable claim (a
        newer version's) counts as a request with the defaults (rolled back, no reason):
        someone asked to stop the run.

    Raises:
        StorageError: the claims store failed.
    """
    text = env.storage.claims.interrupt_resumes(run_id, [CANCEL_CLAIM_PATH]).get(
        CANCEL_CLAIM_PATH
    )
    return _decoded(run_id, text)


def _decoded(run_id: str, text: str | None) -> CancelRequest | None:
    """The cancel claim's payload ``text`` decoded (:func:`requested`'s rule): ``None`` when
    absent, the defaults when unreadable."""
    if text is None:
        return None
    try:
        return CancelRequest.decode(text)
    except DeserializationError as exc:
        log.warning("event=cancel_claim_unreadable run_id=%s error=%s", run_id, exc)
        return CancelRequest()


def claim(env: Env, run_id: str, request: CancelRequest) -> CancelRequest:
    """Record ``request`` for root run ``run_id``, first writer wins.

    Args:
        env: the execution environment.
        run_id: the root run.
        request: this caller's request.

    Returns:
        The request that stands: ``request`` when this call recorded it, else the earlier
        one (a second cancel changes nothing).

    Raises:
        StorageError: the claims store failed.
    """
    if env.storage.claims.claim_interrupt_resume(run_id, CANCEL_CLAIM_PATH, request.encode()):
        return request
    return requested(env, run_id) or request


def is_root(state: RunState) -> bool:
    """Whether ``state`` executes a run of its own (its own stored record: a top-level run or
    an ``async_reactor`` child, neither a composed child nor a map element): only such a run
    notices a cancel request (a child's own, or the one its parent's cancel passed on)."""
    ctx = state.ctx
    return state.checkpoint.context is ctx and ctx.map_metadata is None


def cancelled_failure(
    ctx: Context, request: CancelRequest, failures: list[RollbackFailure]
) -> Failure:
    """The ``Failure`` a cancelled run ends with (without ``run_id``).

    Args:
        ctx: the run.
        request: the cancel carried out.
        failures: the rollback failures (undos and compensates that did not complete).

    Returns:
        A non-retryable ``Failure`` of :class:`~reactor.errors.RunCancelledError`.
    """
    because = f": {request.reason}" if request.reason else ""
    kept = "" if request.rollback else " (its completed work was kept: rollback=False)"
    error = RunCancelledError(
        f"run {ctx.context_id!r} was cancelled{because}{kept}", ctx.context_id,
        reason=request.reason, rolled_back=request.rollback,
    )
    return Failure(error, retryable=False, reactor_name=ctx.reactor,
                   rollback_failures=list(failures))


# ------------------------------------------------------------------------------ noticing it


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
    if is_root(state):  # each incremental checkpoint reads the request where it can
        state.checkpoint.noting = (CANCEL_CLAIM_PATH,)
    if ctx.status is not RunStatus.RUNNING or not is_root(state) or ctx.persisted is None:
        return None
    known, state.claims_read = state.claims_read, None  # fresh for this start only
    if known is not None:  # read with the load that started this execution (no request)
        request = _decoded(ctx.context_id, known.get(CANCEL_CLAIM_PATH))
    else:
        request = requested(state.env, ctx.context_id)
    if request is None:
        return None
    in_flight = stored_in_flight(state)
    if hold_for_map(state, request, in_flight):
        assert in_flight is not None
        ref = ctx.composed_contexts[in_flight.step]
        assert isinstance(ref, Mapping)
        raise MapDispatched(ctx.context_id, ctx.reactor, in_flight.step, str(ref["map_id"]))
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
        state: the execution (only a root run is checked).
        result: the step's result; only a ``Success`` (a ``Skipped`` too, never a ``Halt``)
            or a ``Paused`` is checked: a failure or a halt ends the run as it would have.

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
        request = requested(state.env, state.ctx.context_id)
        if request is not None or _child_cancelled(result):
            return request
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
    return requested(state.env, state.ctx.context_id)


def before_step(state: RunState) -> CancelRequest | None:
    """The cancel request the run's last incremental checkpoint read with its write (a
    :class:`~reactor.ports.capabilities.ReadsClaimsWhenAppending` store), checked before each
    step starts: no request of its own (docs/run-control.md, "Cancel").

    Args:
        state: the execution.

    Returns:
        The request, or ``None`` (none read, or the store does not read claims with its
        appends: :func:`at_boundary` reads them then).
    """
    checkpoint = state.checkpoint
    if checkpoint.noted_at is None or not is_root(state):
        return None
    return _decoded(state.ctx.context_id, checkpoint.noted.get(CANCEL_CLAIM_PATH))


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
    are undone. With ``rollback=False`` a step that completed is recorded first (``record``,
    the executor's own recording), and nothing is rolled back.

    Args:
        state: the root run's execution (inside its reactor-level coordination, which
            releases those holds and advances its ordered ticket when the run ends).
        spec: the step that just returned.
        outcome: what it returned (a ``Success`` or a ``Paused``).
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
        _release_correlation(state.env, state.ctx.context_id, result.correlation_id)
    if not request.rollback and isinstance(result, Success):
        record()  # an unstorable value is not recorded: nothing is rolled back either way
        return stop(state, request, in_flight=None, coordinated=True)
    in_flight = None
    if spec.kind in ("step", "compose", "map", "async_reactor"):
        in_flight = InFlight(spec.name, spec.kind, dict(outcome.arguments),
                             body_started=outcome.body_started)
    return stop(state, request, in_flight=in_flight, coordinated=True)


# ------------------------------------------------------------------------------ what is in flight


def stored_in_flight(state: RunState) -> InFlight | None:
    """The step of a stored run whose body started and whose result is not recorded, judged
    from the stored run alone (its execution is not live).

    A composed child embedded (a paused child, one cut off by a crash), a map whose
    elements were recorded (inline) or dispatched (fan-out), the leaf step at
    ``current_step`` after a failed attempt (waiting for a retry), or an ``async_reactor``
    step whose child run is stored (one read of the child's record). A leaf step that a crash
    cut off on its first attempt leaves no trace: it is not compensated.

    Args:
        state: the run (``state.ctx`` as loaded).

    Returns:
        The step in flight (``body_started`` true), or ``None``.
    """
    ctx = state.ctx
    attempts = ctx.retry_context.get("attempts", {})
    for name, spec in state.definition.steps.items():
        if name in ctx.intermediate_results:
            continue
        embedded = ctx.composed_contexts.get(name)
        if spec.kind in ("compose", "map") and embedded is not None:
            arguments = dict(embedded.inputs) if isinstance(embedded, Context) else {}
            return InFlight(name, spec.kind, arguments, body_started=True)
        if spec.kind == "step" and name == ctx.current_step and isinstance(
            attempts, Mapping
        ) and attempts.get(name):
            return InFlight(name, "step", _arguments(spec, ctx), body_started=True)
        if spec.kind == "async_reactor" and _child_record(state, name) is not None:
            return InFlight(name, "async_reactor", {}, body_started=True)
    return None


def _child_record(state: RunState, step: str) -> Context | None:
    """The stored ``async_reactor`` child that step ``step`` of ``state.ctx`` started, if
    any (read with its sealed values closed: only its status is needed)."""
    return load_context(state.env, child_run_id(state.ctx.context_id, step), open_secrets=False)


def _arguments(spec: StepSpec, ctx: Context) -> dict[str, Any]:
    """A leaf step's arguments resolved again from the stored run (for its compensate),
    ``{}`` when they cannot be."""
    try:
        return resolve_arguments(spec, ctx)
    except ArgumentResolutionError:
        return {}


def _fan_out_ref(state: RunState, in_flight: InFlight | None) -> Mapping[str, Any] | None:
    """The fan-out map reference of the step in flight, when it is a fan-out map."""
    if in_flight is None or in_flight.kind != "map":
        return None
    ref = state.ctx.composed_contexts.get(in_flight.step)
    return ref if is_fan_out_ref(ref) else None


def hold_for_map(state: RunState, request: CancelRequest, in_flight: InFlight | None) -> bool:
    """Stop a fan-out map in flight; tell whether the cancel must wait for it to settle.

    When the step in flight is a fan-out map whose elements have not all settled, the map
    stops dispatching (its failed-context claim is taken: pending elements skip themselves,
    undispatched ones settle as skipped; docs/fan_out.md, "What happens"). With
    ``rollback=True`` the request is then kept on the run (saved) and the cancel waits: the
    map's collector resumes the run once every element settled, and that execution rolls
    the elements back (:func:`at_start`). Elements still running cannot be rolled back
    before they finish.

    Args:
        state: the root run (its execution or its canceller, holding its liveness lock).
        request: the cancel request.
        in_flight: the step in flight (:func:`stored_in_flight`).

    Returns:
        ``True`` when the run waits for the map (nothing more to do now), else ``False``.

    Raises:
        StorageError, LockLost: a backend failed, or the run is not this holder's any more.
    """
    ref = _fan_out_ref(state, in_flight)
    if ref is None:
        return False
    maps = state.env.storage.maps
    map_id, count = str(ref["map_id"]), int(ref.get("count") or 0)
    if maps.metadata(map_id) is None or maps.count_results(map_id) >= count:
        return False
    ctx = state.ctx
    maps.set_failed_context(map_id, f"cancel:{ctx.context_id}")
    log.info("event=cancel_stopped_map run_id=%s map_id=%s", ctx.context_id, map_id)
    if not request.rollback:
        return False
    ctx.engine_state = replace(ctx.engine_state, cancel=request)
    state.checkpoint.save()
    return True


def hold_for_child(state: RunState, request: CancelRequest, in_flight: InFlight | None) -> bool:
    """Pass ``request`` on to the ``async_reactor`` child in flight; tell whether the cancel
    must wait for the child to end.

    The child run is a run of its own (docs/run-control.md, "async_reactor"): the request is
    claimed for it too (first writer wins), and when nobody executes it (queued, paused at an
    interrupt, its worker dead) it is cancelled here, under its liveness lock
    (:func:`cancel_stored`, which passes the request on to its own children). A child that an
    execution owns carries the request out itself, at its next boundary or when its parked
    job comes back. While the child has not ended the parent waits for it, so a child that
    completed before it read the request is undone by the parent's rollback (compensating
    the step in flight), never left standing.

    Args:
        state: the run being cancelled (its execution or its canceller, holding its lock).
        request: the cancel request.
        in_flight: the step in flight (:func:`stored_in_flight`).

    Returns:
        ``True`` when the child has not ended yet (the parent waits for it), else ``False``.

    Raises:
        StorageError: a backend failed.
    """
    if in_flight is None or in_flight.kind != "async_reactor":
        return False
    env = state.env
    child_id = child_run_id(state.ctx.context_id, in_flight.step)
    child = load_context(env, child_id, open_secrets=False)
    if child is None or child.status in TERMINAL_STATUSES:
        return False
    claim(env, child_id, request)
    hold = liveness.take(env, child_id)
    if hold is None:  # an execution owns the child: it carries the request out
        return True
    try:
        if hold.lock is not None:
            cancel_stored(env, state.definition.children[in_flight.step], child_id, request, hold)
    finally:
        hold.release()  # after the child's final save
    child = load_context(env, child_id, open_secrets=False)
    return child is not None and child.status not in TERMINAL_STATUSES


class HolderCheckpointer(Checkpointer):
    """Saves of a canceller (:func:`cancel_stored`): fenced with its liveness hold, and not a
    worker's (a fan-out map is rolled back in this process, never handed to element jobs:
    docs/fan_out.md, "Rollback").

    Args:
        env: the execution environment.
        record_context: the run.
        hold: the canceller's hold on ``async:<id>``.
    """

    def __init__(self, env: Env, record_context: Context, hold: Liveness) -> None:
        super().__init__(env, record_context)
        self.hold = hold

    def fence(self) -> Fence | None:
        """The hold's fence: the store refuses the save once a newer holder saved."""
        return self.hold.fence()


def cancel_stored(
    env: Env, definition: ReactorDefinition, run_id: str, request: CancelRequest,
    hold: Liveness,
) -> Failure | None:
    """Carry out ``request`` on stored run ``run_id`` under its liveness lock ``hold``, in
    this process: nobody executes the run (``Reactor.cancel`` of a queued, paused or parked
    run; a parent's cancel passed on to its ``async_reactor`` child).

    Args:
        env: the execution environment (secrets opened: the undos run here).
        definition: the run's reactor definition.
        run_id: the run.
        request: the request that stands.
        hold: the canceller's hold on the run's liveness lock (released by the caller).

    Returns:
        The cancelled run's ``Failure`` (without ``run_id``; the completion published);
        ``None`` when the run is not stored, has ended, or must wait for a fan-out map or a
        child to end (its own execution finishes the cancel then).

    Raises:
        StorageError, LockLost: a backend failed, or the lock lapsed while cancelling (the
            request stays claimed: the run's next execution carries it out).
    """
    ctx = load_context(env, run_id)
    if ctx is None or ctx.status in TERMINAL_STATUSES or ctx.status is RunStatus.ROLLING_BACK:
        return None
    state = RunState(definition, ctx, env, HolderCheckpointer(env, ctx, hold))
    if ctx.rollback is not None:  # a cancel's rollback cut off (its worker died): finish it
        failure = conclude(state)
    else:
        in_flight = stored_in_flight(state)
        if hold_for_map(state, request, in_flight) or hold_for_child(state, request, in_flight):
            log.info("event=cancel_waits run_id=%s step=%s", run_id,
                     in_flight.step if in_flight is not None else None)
            return None
        failure = stop(state, request, in_flight=in_flight, coordinated=False)
    publish_completion(env.storage, ctx)
    return failure


# ------------------------------------------------------------------------------ carrying it out


def stop(
    state: RunState, request: CancelRequest, *, in_flight: InFlight | None, coordinated: bool
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
        _release_correlation(state.env, ctx.context_id, pending.correlation_id)
    ctx.engine_state = replace(ctx.engine_state, cancel=request, interrupt=None, waiting=None)
    step = in_flight.step if in_flight is not None else None
    state.trace("cancelled", step, detail=request.reason)
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
    ctx.status = RunStatus.CANCELLED
    ctx.current_step = None
    failure = cancelled_failure(ctx, request, failures)
    ctx.failure = failure
    state.checkpoint.save()
    log.info("event=run_cancelled run_id=%s rolled_back=%s rollback_failures=%d",
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


def _release_correlation(env: Env, run_id: str, correlation_id: str) -> None:
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

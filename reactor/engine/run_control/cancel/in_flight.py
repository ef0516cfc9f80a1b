"""What a cancel finds in flight: the step, composed child or fan-out map a stored run was
executing, waiting for a map or an ``async_reactor`` child to end, and cancelling a stored
run nobody executes (docs/run-control.md, "Cancel").
"""

import logging
from dataclasses import replace
from typing import Any

from reactor.dsl.declarations import StepSpec
from reactor.dsl.definition import ReactorDefinition
from reactor.engine import liveness
from reactor.engine.arguments import resolve_arguments
from reactor.engine.checkpoint import Checkpointer, load_context
from reactor.engine.dispatch import publish_completion
from reactor.engine.env import Env
from reactor.engine.liveness import Liveness
from reactor.engine.run_control.cancel.conclusion import conclude, stop
from reactor.engine.run_control.cancel.requests import (
    claim,
)
from reactor.engine.state import InFlight, RunState
from reactor.errors import (
    ArgumentResolutionError,
)
from reactor.model.context import Context
from reactor.model.engine_state import CancelRequest
from reactor.model.keys import child_run_id
from reactor.model.records import Fence
from reactor.model.results import Failure
from reactor.model.run_records import MapRef
from reactor.model.status import TERMINAL_STATUSES, RunStatus

log = logging.getLogger("reactor.cancel")




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
    for name, spec in state.definition.steps.items():
        if name in ctx.intermediate_results:
            continue
        embedded = ctx.composed_contexts.get(name)
        if spec.kind in ("compose", "map") and embedded is not None:
            arguments = dict(embedded.inputs) if isinstance(embedded, Context) else {}
            return InFlight(name, spec.kind, arguments, body_started=True)
        if spec.kind == "step" and name == ctx.current_step and ctx.attempts_of(name):
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


def _fan_out_ref(state: RunState, in_flight: InFlight | None) -> MapRef | None:
    """The fan-out map reference of the step in flight, when it is a fan-out map."""
    if in_flight is None or in_flight.kind != "map":
        return None
    ref = state.ctx.map_ref(in_flight.step)
    return ref if ref is not None and ref.is_fan_out else None


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
    map_id, count = ref.map_id, ref.count or 0
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



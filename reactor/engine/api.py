"""Entry points behind ``Reactor.run``/``execute``, ``Reactor.find`` and ``Reactor.undo``.

docs/concepts.md, "A synchronous run": a run creates a context with a fresh id, validates the
inputs (an invalid input stores the context as ``failed`` and returns a ``Failure`` with field-level
``validation_errors``; no step runs), then executes. ``find`` reads a stored run back as a
redacted :class:`~reactor.model.run_view.RunView`; ``undo`` finishes an aborted run's rollback or
undoes a completed one (docs/concepts.md, "Stored runs").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from reactor.config import Runtime
from reactor.dsl.deadlines import absolute_deadline
from reactor.dsl.definition import ReactorDefinition
from reactor.engine import (
    background,
    compatibility,
    executor,
    liveness,
    observe,
    retained,
    rollback,
    secret_policy,
    step_transactions,
)
from reactor.engine.checkpoint import Checkpointer, load_context
from reactor.engine.dispatch import DispatchHandle
from reactor.engine.env import Env, make_env
from reactor.engine.invoke import INTERRUPTIONS
from reactor.engine.liveness import Liveness
from reactor.engine.maps import fan_out
from reactor.engine.maps.elements import element_reader
from reactor.engine.maps.rollback import roll_back_fan_out
from reactor.engine.run_control import deadline as run_deadline
from reactor.engine.start import launch
from reactor.engine.state import RunState
from reactor.errors import RouterError, RunNotFoundError, RunStateError, StorageError, UndoError
from reactor.model.context import Context, new_context_id
from reactor.model.results import Failure, Paused, RollbackFailure, Success
from reactor.model.run_links import RunLinks
from reactor.model.run_view import RunView
from reactor.model.status import RunStatus

__all__ = ["find", "load_run", "run", "undo"]

_UNDO_REFUSED = frozenset(
    {RunStatus.PENDING, RunStatus.RUNNING, RunStatus.PAUSED, RunStatus.ROLLING_BACK,
     RunStatus.SUSPENDED, RunStatus.FAILED_PAUSED}
)


def run(
    definition: ReactorDefinition,
    inputs: Mapping[str, Any],
    *,
    runtime: Runtime | None = None,
    sleep: Callable[[float], None] | None = None,
    context_id: str | None = None,
    links: RunLinks | None = None,
    hold: Liveness | None = None,
    deadline: Any = None,
) -> Success | Failure | Paused | DispatchHandle:
    """Run a reactor; the result carries ``run_id``.

    ``context_id``, ``links`` and ``hold`` serve run control (docs/run-control.md): the
    id to store the run under (default a fresh one), the run-control links to start it with
    (:class:`~reactor.model.run_links.RunLinks`: an idempotency key, ``retried_from``), and a
    liveness hold on
    ``async:<context_id>`` the caller already took (released here once the run is stored, or
    at the end of a synchronous run).

    The run holds its liveness lock ``async:<id>`` while it executes, so a sweeper never
    re-dispatches a live synchronous run, and every checkpoint is fenced with the lock's token
    (docs/workers.md, "Stale writers and fenced saves"). A reactor with ``background`` hands
    the run to a worker (:mod:`reactor.engine.background`) and returns a
    :class:`~reactor.engine.dispatch.DispatchHandle` (or the final result if the run already
    finished, e.g. on the inline router). A fan-out map (:mod:`reactor.engine.maps.fan_out`) is a
    hand-off point too: the run is saved, its elements dispatched, and the caller gets a
    ``DispatchHandle`` (or the final result when everything already ran inline). A run that
    reaches an interrupt is stored ``paused`` and returns a
    :class:`~reactor.model.results.Paused` (docs/run-control.md, "Interrupts"); one that
    reaches a ``sleep`` step whose wake time is ahead is stored ``paused`` with a sleep marker
    and returns a ``DispatchHandle``: a worker continues it when it wakes (docs/schedules.md,
    "Durable sleep").

    ``deadline`` (seconds from now, a ``timedelta`` or a timezone-aware ``datetime``; ``None``:
    the reactor class's ``deadline``, if any) is stored on the run; a run that leaves this call
    unfinished gets its ``run_deadline`` timer job (docs/concepts.md, "Run deadlines").

    Raises:
        DeadlineError: ``deadline`` is unusable (nothing was stored).
        ConfigurationError: the reactor has ``redact=True`` values, the backend is not
            in-process and no secret key is configured (docs/security.md, "Secure by
            default"), or it has a transactional step and the storage cannot run one
            (docs/concepts.md, "Transactional steps"); nothing was stored.
        KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError, CancelledError: after the
            run was stored as ``aborted``; the exception carries the run id as its
            ``reactor_run_id`` attribute (and a note) so the caller can ``Reactor.undo`` it.
        StorageError: the storage failed while the run executed (a checkpoint, the liveness
            lock); ``exc.run_id`` is the run id and the message names the run. Nothing is
            rolled back: the run stays at its last stored checkpoint (``running``), its lock
            is released or lapses, and the run sweeper hands it to a worker, which resumes it
            (docs/workers.md, "Storage outages during a synchronous run").
        RouterError: a background hand-off stored the run and then failed to enqueue its
            job; ``exc.run_id`` is the run id and the message names the run, stored
            ``running``: the run sweeper hands it to a worker.
        LockLost: the caller stalled past its liveness lock's TTL (or its renewals failed
            until the deadline) and stopped before writing; ``StaleWriterError`` (a
            ``LockLost``) when another execution already took the run over and saved it: the
            stored run is that execution's, untouched by this caller.
    """
    context_id = context_id or new_context_id()
    definition.register_codec_types()
    env = make_env(runtime, sleep)
    try:
        deadline_at = absolute_deadline(deadline, definition.deadline, env.now())
        secret_policy.check(definition, env)
        step_transactions.check(definition, env)
    except BaseException:
        if hold is not None:
            hold.release()
        raise
    outcome = _start(definition, inputs, env, context_id, links, hold, deadline_at)
    if deadline_at is not None and not isinstance(outcome, Success | Failure):
        # it left this call unfinished (a worker, an interrupt, a fan-out map): its timer
        run_deadline.schedule(env, context_id, definition.name, deadline_at)
    return outcome


def _start(
    definition: ReactorDefinition,
    inputs: Mapping[str, Any],
    env: Env,
    context_id: str,
    links: RunLinks | None,
    hold: Liveness | None,
    deadline_at: float | None,
) -> Success | Failure | Paused | DispatchHandle:
    """Store and start the run (see :func:`run`)."""
    declared = definition.background
    try:
        if declared is not None and declared.mode == "all":
            try:
                return background.start_all(
                    definition, inputs, env, context_id=context_id,
                    links=links, hold=hold, deadline=deadline_at,
                )
            finally:
                if hold is not None:
                    hold.release()
        with _holding(env, context_id, hold) as held:
            try:
                ctx, result = launch(
                    definition, inputs, env, execute=executor.execute, context_id=context_id,
                    hand_off=background.trigger(declared), hold=held,
                    links=links, deadline=deadline_at,
                )
            except background.HandOff as handoff:  # save, enqueue, then release the lock
                state = handoff.state
                with observe.continued(handoff):  # its job joins the run's trace
                    return background.dispatch(env, state.ctx, state.checkpoint, mode=handoff.mode)
            except fan_out.MapDispatched as dispatched:  # saved before dispatch: no save here
                return fan_out.caller_result(env, dispatched)
    except (StorageError, RouterError) as exc:
        _name_run(exc, context_id, definition.name)
        raise
    except INTERRUPTIONS as exc:
        if getattr(exc, "reactor_run_id", None) is None:
            setattr(exc, "reactor_run_id", context_id)  # noqa: B010 - any exception type
            exc.add_note(
                f"reactor: run {context_id} of {definition.name!r} was stored as aborted; "
                f"finish its rollback with Reactor.undo({context_id!r})"
            )
        raise
    if ctx.status is RunStatus.SUSPENDED or (  # an operator suspended it (docs/operations.md)
        isinstance(result, Paused) and result.sleeping_until is not None
    ):  # or it sleeps: a worker continues it when it wakes (docs/schedules.md)
        return DispatchHandle(run_id=ctx.context_id, job_id="", reactor=ctx.reactor,
                              results=dict(ctx.intermediate_results), runtime=env.runtime)
    return result.with_run_id(ctx.context_id)


@contextmanager
def _holding(env: Env, context_id: str, hold: Liveness | None) -> Iterator[Liveness]:
    """Hold ``async:<context_id>`` for a synchronous run: the caller's ``hold`` when given
    (released on exit), else a fresh one (:func:`reactor.engine.liveness.held`)."""
    if hold is None:
        with liveness.held(env, context_id) as fresh:
            yield fresh
        return
    try:
        yield hold
    finally:
        hold.release()


def _name_run(exc: StorageError | RouterError, context_id: str, reactor_name: str) -> None:
    """Tag a storage or router error that escaped run ``context_id`` with the run id
    (attribute and message); an error already naming a run (a nested run's) is left alone."""
    if getattr(exc, "run_id", None) is not None:
        return
    exc.run_id = context_id
    message = str(exc) or type(exc).__name__
    exc.args = (f"run {context_id!r} of {reactor_name!r}: {message}", *exc.args[1:])


def load_run(
    definition: ReactorDefinition | None, run_id: str, env: Env, *, open_secrets: bool = True
) -> Context:
    """Load stored run ``run_id``, checking it belongs to ``definition`` (any reactor when
    ``None``).

    Args:
        definition: the reactor the caller works for, or ``None``.
        run_id: the run id.
        env: the execution environment.
        open_secrets: decrypt sealed secrets (a caller that runs steps or undos);
            ``False`` for a reader (docs/security.md, "Where secrets are decrypted").

    Returns:
        The context.

    Raises:
        RunNotFoundError: no such run, or it belongs to another reactor.
        DeserializationError: the stored run is unreadable (``SecretKeyError`` included).
    """
    ctx = load_context(env, run_id, open_secrets=open_secrets)
    if ctx is None:
        raise RunNotFoundError(f"no stored run {run_id!r}", run_id=run_id)
    if definition is not None and ctx.reactor != definition.name:
        raise RunNotFoundError(
            f"run {run_id!r} belongs to reactor {ctx.reactor!r}, not {definition.name!r}",
            run_id=run_id,
        )
    return ctx


def find(
    definition: ReactorDefinition | None, run_id: str, *, runtime: Runtime | None = None
) -> RunView:
    """Load a stored run as a :class:`RunView` (``definition=None``: any reactor); its secrets
    are not decrypted (they show as ``"[REDACTED]"``), so no key is needed."""
    env = make_env(runtime)
    ctx = load_run(definition, run_id, env, open_secrets=False)
    return RunView.from_context(ctx, element_reader(env.storage))  # docs/fan_out.md


def undo(
    definition: ReactorDefinition | None,
    run_id: str,
    *,
    runtime: Runtime | None = None,
    sleep: Callable[[float], None] | None = None,
) -> Success | Failure:
    """Roll back a stored run (see ``Reactor.undo``).

    The run's liveness lock ``async:<id>`` is taken **before** the run whose undo stack is
    replayed is read, and held until its final save (docs/protocol.md, "Rollback jobs: lock
    before read"): a second undo of the same run waits for the first (up to
    ``context_lock_ttl`` seconds), then reads what it undid, so no undo runs twice.

    Raises:
        RunNotFoundError, DeserializationError: as :func:`load_run`.
        RunStateError: the run is not finished, or another execution held it for longer than
            ``context_lock_ttl`` seconds (``exc.status``: its stored status).
        DefinitionMismatchError: a step on the run's undo stack is not declared any more,
            has another kind or lost its undo (docs/deploys.md, "Compatibility rules");
            nothing changed.
        StorageError: a backend failed.
    """
    env = make_env(runtime, sleep)
    ctx = load_run(definition, run_id, env)  # an unknown or unfinished run takes no lock
    _refuse_unfinished(ctx, run_id)
    hold = liveness.take(env, run_id, wait=env.settings.context_lock_ttl)
    if hold is None:
        raise RunStateError(
            f"run {run_id!r} is held by another execution (its liveness lock); try again",
            run_id=run_id, status=ctx.status.value,
        )
    try:
        ctx = load_run(definition, run_id, env)  # under the lock: what an earlier undo left
        _refuse_unfinished(ctx, run_id)
        return _undo_held(definition, run_id, ctx, env)
    finally:
        hold.release()  # after the final save


def _refuse_unfinished(ctx: Context, run_id: str) -> None:
    """Raise :class:`RunStateError` for a run ``Reactor.undo`` must not touch."""
    if ctx.status in _UNDO_REFUSED:
        raise RunStateError(
            f"run {run_id!r} is {ctx.status.value}; only a finished or aborted run can be undone",
            run_id=run_id,
            status=ctx.status.value,
        )


def _undo_held(
    definition: ReactorDefinition | None, run_id: str, ctx: Context, env: Env
) -> Success | Failure:
    """The rollback of :func:`undo`, under the run's liveness lock."""
    pending = ctx.rollback is not None and ctx.rollback.compensate_pending
    # A run cancelled with rollback=False keeps its undo stack: undo rolls it back now
    # (docs/run-control.md, "Cancel"); any other cancelled run has nothing left to undo, and
    # its stored rollback failures are the answer (an earlier undo whose caller never got its
    # result, a worker's rollback: docs/concepts.md, "Stored runs").
    if ctx.status in (RunStatus.CANCELLED, RunStatus.FAILED) and not ctx.undo_stack and (
        not pending
    ):
        stored = list(ctx.failure.rollback_failures) if ctx.failure is not None else []
        return _undo_result(ctx, run_id, stored)
    if definition is None:
        definition = retained.definition_for(ctx)  # docs/deploys.md
    assert definition is not None
    compatibility.require(definition, ctx, forward=False)  # docs/deploys.md
    state = RunState(definition, ctx, env, Checkpointer(env, ctx))
    with observe.run(env, ctx, "undo"):  # docs/observability.md, "Middleware"
        try:
            failures = rollback.finish(state, roll_back_fan_out=roll_back_fan_out)
        except INTERRUPTIONS:
            ctx.status = RunStatus.ABORTED
            try:
                state.checkpoint.save()
            except Exception:
                pass
            raise
        ctx.rollback = None
        ctx.current_step = None
        if ctx.status is not RunStatus.FAILED:
            ctx.status = RunStatus.CANCELLED
        if failures:  # kept with the run, in the same save: a second undo reports them
            ctx.failure = (
                _undo_failure(ctx, run_id, failures)
                if ctx.failure is None
                else dataclasses.replace(
                    ctx.failure, rollback_failures=[*ctx.failure.rollback_failures, *failures]
                )
            )
        state.checkpoint.save()
    return _undo_result(ctx, run_id, failures)


def _undo_failure(ctx: Context, run_id: str, failures: list[RollbackFailure]) -> Failure:
    """The ``Failure(UndoError)`` of an incomplete rollback (without ``run_id``)."""
    return Failure(
        UndoError(f"rollback of run {run_id!r} is incomplete: {len(failures)} failure(s)"),
        retryable=False,
        reactor_name=ctx.reactor,
        rollback_failures=failures,
    )


def _undo_result(ctx: Context, run_id: str, failures: list[RollbackFailure]) -> Success | Failure:
    """What :func:`undo` returns: ``Success(None)``, or ``Failure(UndoError)`` carrying
    ``failures`` when the run's rollback is incomplete."""
    if failures:
        return dataclasses.replace(_undo_failure(ctx, run_id, failures), run_id=run_id)
    return Success(None, run_id=run_id)

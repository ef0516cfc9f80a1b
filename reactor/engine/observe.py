"""The engine's calls into the runtime's middleware (docs/observability.md, "Middleware").

Each helper returns a context manager to run the work in: with no middleware registered it is
:data:`NULL`, whose enter, exit and ``done`` do nothing, so the engine builds no
event and pays one call per scope. Otherwise the helper builds the
:mod:`reactor.middleware` event from the engine's state and fills in its outcome when the work
ends: a run segment's from the context's status (or the exception that ended it), a step
attempt's and a rollback's from the result handed to ``done``. Error messages are shown with
the run's and the step's secret values masked (:func:`reactor.model.masking.mask_text`).

A :class:`~reactor.engine.parks.Park` leaving a step or run scope is reported once to
:meth:`reactor.middleware.Middleware.on_park`, by the innermost scope it crosses.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from types import TracebackType
from typing import Any

from reactor.engine.env import Env
from reactor.engine.invoke import INTERRUPTIONS
from reactor.engine.parks import Park
from reactor.engine.state import RunState
from reactor.middleware import (
    Hooks,
    ParkEvent,
    ResumeEvent,
    RollbackEvent,
    RunEvent,
    RunOrigin,
    Scope,
    StepAction,
    StepEvent,
)
from reactor.model.context import Context
from reactor.model.masking import mask_text
from reactor.model.results import Failure, Halt, Paused, Result, RollbackFailure, Skipped
from reactor.model.status import RunStatus
from reactor.ports.payloads import TraceContext, current_stamp, stamping

__all__ = ["NULL", "NullScope", "continued", "resumed", "rollback", "run", "step"]

#: Statuses a run segment can leave a run in that end it (or pause it) here.
_OUTCOMES = frozenset({
    RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.HALTED, RunStatus.CANCELLED,
    RunStatus.PAUSED, RunStatus.ABORTED,
})

#: The trace context current when a run segment was suspended by a control-flow exception
#: (a hand-off), for the job its catcher enqueues once the segment's span ended
#: (:func:`continued`).
_CARRIED: weakref.WeakKeyDictionary[BaseException, TraceContext] = weakref.WeakKeyDictionary()

#: The park last reported to ``on_park`` in this context (the innermost scope reports it; the
#: outer ones it crosses next see it here and skip it), weakly: its frames are not kept.
_REPORTED: ContextVar[weakref.ref[BaseException] | None] = ContextVar(
    "reactor_reported_park", default=None
)

log = logging.getLogger("reactor.middleware")


class NullScope:
    """The scope of a runtime with no middleware: does nothing, costs nothing."""

    __slots__ = ()

    def __enter__(self) -> NullScope:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def done(self, result: object) -> None:
        """Ignore the outcome."""


#: The shared do-nothing scope.
NULL = NullScope()


def _secret_values(ctx: Context, extra: Mapping[str, Any] | None = None,
                   names: Iterable[str] = ()) -> list[Any]:
    """The run's secret input values, plus ``extra[name]`` for each secret argument name."""
    values = [ctx.inputs[name] for name in ctx.redacted if name in ctx.inputs]
    if extra:
        values.extend(extra[name] for name in names if name in extra)
    return values


def _internal_failure(hook: str, exc: Exception) -> None:
    """Log a failure of this module's own bookkeeping (never raises, never stops the work)."""
    log.warning("event=middleware_failed middleware=reactor hook=%s error=%s: %s",
                hook, type(exc).__name__, exc, exc_info=exc)


def _failure_type(failure: Failure) -> str:
    """A failure's exception class, ``Failure`` for one made from a message (``fail("...")``)."""
    return failure.exception_class or "Failure"


def _error_of(exc: BaseException) -> tuple[str, str]:
    return type(exc).__name__, str(exc)


def _report_park(hooks: Hooks, exc: BaseException | None, ctx: Context) -> None:
    if not isinstance(exc, Park):
        return
    reported = _REPORTED.get()
    if reported is not None and reported() is exc:
        return
    _REPORTED.set(weakref.ref(exc))
    hooks.park(ParkEvent(run_id=ctx.context_id, reactor=ctx.reactor, reason=exc.reason,
                         delay=exc.delay, step=exc.step))


def _ended_by(event: RunEvent | StepEvent | RollbackEvent, exc: BaseException,
              secrets: Sequence[Any]) -> None:
    """Fill ``event``'s outcome from the exception that ended its work."""
    if isinstance(exc, INTERRUPTIONS):
        event.status = "aborted"
        event.error_type = type(exc).__name__
    elif isinstance(exc, Exception):
        event.status = "error"
        event.error_type, message = _error_of(exc)
        if not isinstance(event, RollbackEvent):
            event.error_message = mask_text(message, secrets)
    else:  # control flow: a hand-off, a park, a retry later, a map dispatched
        event.status = "suspended"
        if isinstance(event, RunEvent):
            event.detail = type(exc).__name__


# ------------------------------------------------------------------------------ runs


class _RunScope:
    """A run segment's scope: its outcome is the context's status when it ends."""

    __slots__ = ("_ctx", "_hooks", "_scope")

    def __init__(self, hooks: Hooks, ctx: Context, origin: RunOrigin, started: bool,
                 resumed_from: TraceContext | None = None) -> None:
        self._hooks = hooks
        self._ctx = ctx
        membership = ctx.map_metadata
        self._scope = hooks.run(RunEvent(
            run_id=ctx.context_id, reactor=ctx.reactor, origin=origin,
            root_run_id=ctx.root_context_id or ctx.context_id,
            parent_run_id=ctx.parent_context_id,
            map_step=None if membership is None else membership.map_step,
            element_index=None if membership is None else membership.index,
            started=started, status_before=ctx.status.value, resumed_from=resumed_from,
        ))

    def __enter__(self) -> _RunScope:
        self._scope.__enter__()
        return self

    def done(self, result: object) -> None:
        """Nothing to record: the outcome is read from the context at the end."""

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self._outcome(exc)
        except Exception as failure:  # observing must never break the run
            _internal_failure("run", failure)
        self._scope.__exit__(exc_type, exc, tb)

    def _outcome(self, exc: BaseException | None) -> None:
        event, ctx = self._scope.event, self._ctx
        status = ctx.status
        if exc is not None:
            _ended_by(event, exc, _secret_values(ctx) if isinstance(exc, Exception) else ())
            _report_park(self._hooks, exc, ctx)
            if event.status == "suspended" and not isinstance(exc, Park):
                carried = current_stamp()  # the middleware's span is still current here
                if carried is not None:
                    _CARRIED[exc] = carried
        elif status in _OUTCOMES:
            event.status = status.value
        else:
            event.status, event.detail = "suspended", "handed_off"
        failure = ctx.failure
        if status is RunStatus.FAILED and failure is not None:
            event.step = failure.step_name
            event.error_type = _failure_type(failure)
            event.error_message = mask_text(failure.message, _secret_values(ctx))
        elif status is RunStatus.PAUSED and ctx.engine_state.interrupt is not None:
            event.step = ctx.engine_state.interrupt.step


def run(
    env: Env, ctx: Context, origin: RunOrigin, *, started: bool = False,
    resumed_from: TraceContext | None = None,
) -> _RunScope | NullScope:
    """The scope of one execution segment of run ``ctx`` (docs/observability.md,
    "Middleware"): enter it before the run's work and leave it when the segment ends.

    Args:
        env: the execution environment (its runtime's middleware).
        ctx: the run's context (its status at the end is the outcome).
        origin: where the segment started.
        started: the segment creates the run (counted once as started).
        resumed_from: for a run resumed from an interrupt, the trace context of the span
            that paused it (docs/observability.md, "Resumed runs").

    Returns:
        The scope (:data:`NULL` without middleware).
    """
    hooks = env.runtime.hooks
    if not hooks.active:
        return NULL
    return _RunScope(hooks, ctx, origin, started, resumed_from)


def continued(suspension: BaseException) -> stamping | NullScope:
    """Stamp the jobs enqueued in this block with the trace of the run segment that
    ``suspension`` (a hand-off) ended, so a caller's ``Background(after=/before=)`` dispatch,
    made once the segment's span has ended, still joins its trace (docs/observability.md,
    "Propagation").

    Returns:
        The stamping scope, or :data:`NULL` when the segment had no trace context.
    """
    carried = _CARRIED.pop(suspension, None)
    if carried is None:
        return NULL
    return stamping(lambda: carried)


def resumed(env: Env, ctx: Context, step: str, mode: str) -> None:
    """Tell the middleware that paused run ``ctx`` was resumed at interrupt ``step``
    (``mode``: ``inline`` or ``background``)."""
    hooks = env.runtime.hooks
    if hooks.middleware:
        hooks.resume(ResumeEvent(run_id=ctx.context_id, reactor=ctx.reactor, step=step,
                                 mode=mode))


# ------------------------------------------------------------------------------ steps


class _StepScope:
    """A step attempt's scope: its outcome is the result handed to :meth:`done`."""

    __slots__ = ("_arguments", "_ctx", "_hooks", "_scope", "_state")

    def __init__(self, hooks: Hooks, state: RunState, name: str, action: StepAction, kind: str,
                 attempt: int, arguments: Mapping[str, Any] | None) -> None:
        ctx = state.ctx
        self._hooks = hooks
        self._ctx = ctx
        self._state = state
        self._arguments = arguments
        self._scope: Scope[StepEvent] = hooks.step(StepEvent(
            run_id=ctx.context_id, reactor=ctx.reactor,
            root_run_id=ctx.root_context_id or ctx.context_id, step=name, action=action,
            kind=kind, attempt=max(attempt, 1),
        ))

    def __enter__(self) -> _StepScope:
        self._scope.__enter__()
        return self

    def _secrets(self) -> list[Any]:
        """The secret values an error message of this step may echo (computed on failure)."""
        arguments, ctx = self._arguments, self._ctx
        names: Iterable[str] = (
            self._state.definition.secret_arguments(self._scope.event.step, arguments,
                                                    ctx.redacted)
            if arguments else ()
        )
        return _secret_values(ctx, arguments, names)

    def done(self, result: Result | Sequence[RollbackFailure] | object) -> None:
        """Record the attempt's result (a ``Result``; for an undo or compensate, the
        ``Result`` of the hook)."""
        try:
            self._record(result)
        except Exception as failure:  # observing must never break the run
            _internal_failure("step", failure)

    def _record(self, result: object) -> None:
        event = self._scope.event
        if isinstance(result, Failure):
            event.status = "failed"
            event.retryable = result.retryable
            event.error_type = _failure_type(result)
            event.error_message = mask_text(result.message, self._secrets())
        elif isinstance(result, Paused):
            event.status = "paused"
        elif isinstance(result, Halt):
            event.status = "halted"
        elif isinstance(result, Skipped):
            event.status = "skipped"
        else:
            event.status = "completed"

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        event = self._scope.event
        try:
            if exc is not None:
                _ended_by(event, exc, self._secrets() if isinstance(exc, Exception) else ())
                _report_park(self._hooks, exc, self._ctx)
            elif event.status is None:
                event.status = "completed"
        except Exception as failure:  # observing must never break the run
            _internal_failure("step", failure)
        self._scope.__exit__(exc_type, exc, tb)


def step(
    state: RunState,
    name: str,
    action: StepAction = "run",
    *,
    kind: str = "step",
    attempt: int = 1,
    arguments: Mapping[str, Any] | None = None,
) -> _StepScope | NullScope:
    """The scope of one attempt of step ``name``'s ``action`` (docs/observability.md,
    "Middleware"); hand its result to ``done`` before the scope ends.

    Args:
        state: the context the step belongs to.
        name: the step.
        action: ``run``, ``undo`` or ``compensate``.
        kind: the step kind.
        attempt: the attempt number, from 1.
        arguments: the step's arguments (only their secret values are used: to mask them in
            an error message).

    Returns:
        The scope (:data:`NULL` without middleware).
    """
    hooks = state.env.runtime.hooks
    if not hooks.active:
        return NULL
    return _StepScope(hooks, state, name, action, kind, attempt, arguments)


# ------------------------------------------------------------------------------ rollbacks


class _RollbackScope:
    """A rollback's scope: its outcome is the rollback failures handed to :meth:`done`."""

    __slots__ = ("_scope",)

    def __init__(self, hooks: Hooks, state: RunState) -> None:
        ctx = state.ctx
        record = ctx.rollback
        step_name = record.step if record is not None else None
        failure = ctx.failure
        if record is not None and record.interruption:
            reason = "interrupted"
        elif step_name:
            reason = "step_failed"
        elif ctx.status in (RunStatus.COMPLETED, RunStatus.HALTED):
            reason = "undo"
        else:
            reason = "requested"
        self._scope = hooks.rollback(RollbackEvent(
            run_id=ctx.context_id, reactor=ctx.reactor,
            root_run_id=ctx.root_context_id or ctx.context_id, reason=reason,
            step=step_name,
            error_type=_failure_type(failure) if failure is not None else None,
        ))

    def __enter__(self) -> _RollbackScope:
        self._scope.__enter__()
        return self

    def done(self, failures: Sequence[RollbackFailure]) -> None:
        """Record the rollback's failures (all of them, so far)."""
        event = self._scope.event
        event.failures = len(failures)
        event.status = "incomplete" if failures else "completed"

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        event = self._scope.event
        if exc is not None:
            _ended_by(event, exc, ())
        elif event.status is None:
            event.status = "completed"
        self._scope.__exit__(exc_type, exc, tb)


def rollback(state: RunState) -> _RollbackScope | NullScope:
    """The scope of rolling ``state.ctx`` back (docs/observability.md, "Middleware"); hand
    the rollback failures to ``done`` before it ends.

    Returns:
        The scope (:data:`NULL` without middleware).
    """
    hooks = state.env.runtime.hooks
    if not hooks.active:
        return NULL
    return _RollbackScope(hooks, state)

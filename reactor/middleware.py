"""Middleware: typed hooks around what the engine does (docs/observability.md, "Middleware").

A :class:`Middleware` overrides the hooks it needs; every hook of the base class does nothing.
Middleware is registered in configuration (``reactor.configure(middleware=[...])``, or by name
with the ``middleware`` setting) and carried by the :class:`~reactor.config.Runtime` as a
:class:`Hooks` chain, which the engine, the job handlers and the worker call.

Two kinds of hooks:

* **Scopes** — :meth:`Middleware.run`, :meth:`Middleware.step`, :meth:`Middleware.job`,
  :meth:`Middleware.rollback` — are called when the work starts and return a context manager
  (or ``None``: not interested) that is exited when it ends. The event object is the same
  mutable instance at both ends: its outcome fields (``status``, ``error_type``, ``duration``
  ...) are filled in before the context managers exit.
* **Notifications** — :meth:`Middleware.on_park`, :meth:`Middleware.on_resume`,
  :meth:`Middleware.on_dead_letter`, :meth:`Middleware.on_sweep`,
  :meth:`Middleware.on_lock_wait` — are plain calls.

**Order.** Scopes are entered in registration order and exited in reverse order (the first
registered middleware wraps all the others); notifications go in registration order.

**Failures never break a run.** An exception raised by a hook (when it is called, entered or
exited) is logged once, at WARNING on the ``reactor.middleware`` logger, as
``event=middleware_failed middleware=<name> hook=<hook> error=<type>: <message>`` with its
traceback, and the work goes on; a scope whose entry failed is not exited. A context manager
cannot swallow the engine's exceptions either: what it returns from ``__exit__`` is ignored.

**Cost.** With no middleware registered (and no log context, :func:`enable_log_context`),
:attr:`Hooks.active` is false and the engine builds no event at all.

Events carry identities and outcomes only — run ids, reactor and step names, attempts,
statuses, exception class names and secret-masked messages — never inputs or arguments
(docs/security.md, "What each view shows").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar, Token
from dataclasses import dataclass
from types import TracebackType
from typing import Generic, Literal, TypeVar

from reactor.ports.payloads import TraceContext

__all__ = [
    "NO_HOOKS",
    "DeadLetterEvent",
    "Hooks",
    "JobEvent",
    "LockWaitEvent",
    "LogContext",
    "Middleware",
    "ParkEvent",
    "ResumeEvent",
    "RollbackEvent",
    "RunEvent",
    "RunOrigin",
    "Scope",
    "StepAction",
    "StepEvent",
    "SweepEvent",
    "current_log_context",
    "enable_log_context",
    "middleware_name",
]

log = logging.getLogger("reactor.middleware")

#: Where a run segment started: a new run in the caller (``start``), a worker's ``run`` job
#: (``worker``), a map element (``element``), ``Reactor.resume`` in the caller (``resume``),
#: ``Reactor.undo`` (``undo``).
RunOrigin = Literal["start", "worker", "element", "resume", "undo"]

#: What a step scope runs: the body, its undo or its compensate.
StepAction = Literal["run", "undo", "compensate"]


# ------------------------------------------------------------------------------ events


@dataclass(slots=True)
class RunEvent:
    """One execution segment of a stored run in this process (docs/observability.md,
    "Middleware").

    A run that hands off to a worker, parks or waits for its fan-out map has several segments,
    one per process and job; only the one that leaves it finished has a final ``status``.

    Attributes:
        run_id: the run's id.
        reactor: its registered reactor name.
        origin: where the segment started (:data:`RunOrigin`).
        root_run_id: the root run's id (``run_id`` for a root run).
        parent_run_id: the parent run (a map element), else ``None``.
        map_step: for a map element, the map step's name.
        element_index: for a map element, its index.
        started: the run was created by this segment (count it once as started).
        status_before: the run's stored status when the segment started (``pending`` for a
            new run): a segment that ends in the status it started in did not finish the run
            (``Reactor.undo`` of a failed run stays ``failed``).
        status: set at the end: the run's status (``completed``, ``failed``, ``halted``,
            ``cancelled``, ``paused``, ``aborted``), ``suspended`` when it goes on elsewhere
            (handed off, parked, retried later, waiting for its map) or ``error`` when the
            segment raised.
        step: set at the end: the failed or paused step, when there is one.
        error_type: set at the end: the exception class of a failure or error.
        error_message: set at the end: its message, secrets masked.
        detail: set at the end: what suspended the segment (e.g. ``"Park"``), else ``None``.
        duration: set at the end: seconds the segment took in this process.
        resumed_from: for a segment continuing a run resumed from an interrupt in the caller
            (``origin="resume"``), the trace context of the span that paused it, when the
            pause was traced (a tracing middleware links to it: docs/observability.md,
            "Resumed runs"); else ``None``.
    """

    run_id: str
    reactor: str
    origin: RunOrigin
    root_run_id: str
    parent_run_id: str | None = None
    map_step: str | None = None
    element_index: int | None = None
    started: bool = False
    status_before: str | None = None
    status: str | None = None
    step: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    detail: str | None = None
    duration: float = 0.0
    resumed_from: TraceContext | None = None


@dataclass(slots=True)
class StepEvent:
    """One attempt of one step action: a leaf step's body (every retry is an attempt of its
    own), a compose or map step as a whole, an undo or a compensate.

    Attributes:
        run_id: the context the step belongs to.
        reactor: that context's reactor.
        root_run_id: the root run's id.
        step: the step's name.
        action: ``run``, ``undo`` or ``compensate``.
        kind: the step kind (``step``, ``compose``, ``map``, ``interrupt``, ``async_step``).
        attempt: the attempt number, from 1.
        status: set at the end: ``completed``, ``skipped``, ``halted``, ``paused``,
            ``failed``, ``suspended`` (parked or handed off), ``aborted`` or ``error``.
        retryable: set at the end of a failed attempt: whether the failure may be retried.
        error_type: set at the end: the exception class of a failure.
        error_message: set at the end: its message, secrets masked.
        duration: set at the end: seconds.
    """

    run_id: str
    reactor: str
    root_run_id: str
    step: str
    action: StepAction
    kind: str
    attempt: int = 1
    status: str | None = None
    retryable: bool | None = None
    error_type: str | None = None
    error_message: str | None = None
    duration: float = 0.0


@dataclass(slots=True)
class JobEvent:
    """One job handled by a worker (or inline by the ``inline://`` router).

    Attributes:
        kind: the job kind.
        job_id: the job's id.
        attempt: the envelope's ``attempt`` (re-enqueues of this job chain).
        delivery_count: the router's delivery count (1 inline).
        inline: the job runs nested in the thread that enqueued it.
        run_id: the run the job works for (``context_id`` or ``root_context_id``), if any.
        reactor: the reactor named by the payload, if any.
        step: the step named by the payload (a ``step`` job), if any.
        map_id: the map (map jobs), if any.
        element_index: the element index or rollback position (map jobs), if any.
        trace: the trace context the job carries (docs/observability.md, "Propagation").
        queue_lag: seconds from the job being due (enqueued, or its ``not_before``) to this
            start, when the job carries its enqueue time; else ``None``.
        status: set at the end: ``ok`` or ``error`` (the handler raised: the worker retries or
            dead-letters it).
        error_type: set at the end: the exception class when it raised.
        duration: set at the end: seconds.
    """

    kind: str
    job_id: str
    attempt: int = 0
    delivery_count: int = 1
    inline: bool = False
    run_id: str | None = None
    reactor: str | None = None
    step: str | None = None
    map_id: str | None = None
    element_index: int | None = None
    trace: TraceContext | None = None
    queue_lag: float | None = None
    status: str | None = None
    error_type: str | None = None
    duration: float = 0.0


@dataclass(slots=True)
class RollbackEvent:
    """Rolling a context back: the pending compensate, then its undo stack, newest first
    (docs/concepts.md, "Rollback").

    Attributes:
        run_id: the context being rolled back.
        reactor: its reactor.
        root_run_id: the root run's id.
        reason: ``step_failed`` (a step failed), ``interrupted`` (finishing the rollback of a
            run an interruption stopped), ``undo`` (``Reactor.undo`` of a finished run) or
            ``requested`` (a coordination stop, a parent rolling back its child).
        step: the failed step, when the rollback follows one.
        error_type: the exception class of the failure that caused it, when known.
        status: set at the end: ``completed`` (every entry rolled back cleanly),
            ``incomplete`` (with rollback failures), ``suspended`` (a fan-out map's
            distributed rollback goes on in element jobs), ``aborted`` or ``error``.
        failures: set at the end: how many rollback failures were recorded.
        duration: set at the end: seconds.
    """

    run_id: str
    reactor: str
    root_run_id: str
    reason: str
    step: str | None = None
    error_type: str | None = None
    status: str | None = None
    failures: int = 0
    duration: float = 0.0


@dataclass(frozen=True, slots=True)
class ParkEvent:
    """An execution in a worker gave its thread back to wait (docs/workers.md, "Decisions").

    Attributes:
        run_id: the context that parked.
        reactor: its reactor.
        reason: ``lock``, ``semaphore``, ``rate_limit``, ``ordered_lock``, ``liveness`` or
            ``async_wait``.
        delay: seconds until its job runs again.
        step: the step that parked (``None`` at reactor level).
    """

    run_id: str
    reactor: str
    reason: str
    delay: float
    step: str | None = None


@dataclass(frozen=True, slots=True)
class ResumeEvent:
    """A run paused at an interrupt was resumed (docs/run-control.md, "Interrupts").

    Attributes:
        run_id: the run.
        reactor: its reactor.
        step: the interrupt's step path.
        mode: ``inline`` (continued in the caller) or ``background`` (handed to a worker).
    """

    run_id: str
    reactor: str
    step: str
    mode: str


@dataclass(frozen=True, slots=True)
class DeadLetterEvent:
    """A worker dead-lettered a job (docs/workers.md, "Dead letters").

    Attributes:
        kind: the job kind.
        job_id: the job's id.
        reason: why (a poison job, or the handler failed on every delivery).
    """

    kind: str
    job_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class SweepEvent:
    """One sweep of the sweepers (docs/workers.md, "Sweep cursors and dispatch leases").

    Attributes:
        redispatched: units re-enqueued, by sweeper (``runs``, ``steps``, ``maps``,
            ``map_rollbacks``).
        errors: records a sweeper skipped because inspecting them raised.
    """

    redispatched: Mapping[str, int]
    errors: int = 0


@dataclass(frozen=True, slots=True)
class LockWaitEvent:
    """A synchronous execution waited to take a coordination hold (docs/coordination.md).

    Attributes:
        primitive: ``lock`` or ``semaphore``.
        scope: ``@reactor`` or the step's name.
        seconds: how long it waited.
        acquired: whether it got the hold (``False``: it gave up at its ``wait``).
        run_id: the run, when known.
        reactor: the run's reactor, when known.
    """

    primitive: str
    scope: str
    seconds: float
    acquired: bool
    run_id: str | None = None
    reactor: str | None = None


# ------------------------------------------------------------------------------ middleware


class Middleware:
    """Base class of a middleware: override the hooks you need (docs/observability.md,
    "Middleware"). Every hook of this class does nothing.

    A scope hook returns a context manager entered when the work starts and exited when it
    ends (``None``: not interested in this one); a notification hook returns nothing. Hooks are
    called from every thread that runs reactor work, concurrently: keep them thread-safe.
    """

    @property
    def name(self) -> str:
        """The name failures are logged under (default: the class's qualified name)."""
        return type(self).__qualname__

    def run(self, event: RunEvent) -> AbstractContextManager[object] | None:
        """Around one execution segment of a run (:class:`RunEvent`)."""
        return None

    def step(self, event: StepEvent) -> AbstractContextManager[object] | None:
        """Around one attempt of a step's body, undo or compensate (:class:`StepEvent`)."""
        return None

    def job(self, event: JobEvent) -> AbstractContextManager[object] | None:
        """Around one job's handler (:class:`JobEvent`)."""
        return None

    def rollback(self, event: RollbackEvent) -> AbstractContextManager[object] | None:
        """Around rolling a context back (:class:`RollbackEvent`)."""
        return None

    def on_park(self, event: ParkEvent) -> None:
        """An execution parked in a worker (:class:`ParkEvent`)."""

    def on_resume(self, event: ResumeEvent) -> None:
        """A paused run was resumed (:class:`ResumeEvent`)."""

    def on_dead_letter(self, event: DeadLetterEvent) -> None:
        """A worker dead-lettered a job (:class:`DeadLetterEvent`)."""

    def on_sweep(self, event: SweepEvent) -> None:
        """The sweepers ran once (:class:`SweepEvent`)."""

    def on_lock_wait(self, event: LockWaitEvent) -> None:
        """A synchronous execution waited for a lock or semaphore (:class:`LockWaitEvent`)."""


def middleware_name(middleware: Middleware) -> str:
    """``middleware.name``, or its class name when reading the name fails."""
    try:
        name = middleware.name
    except Exception:
        name = ""
    return name if isinstance(name, str) and name else type(middleware).__qualname__


def _report(middleware: Middleware, hook: str, exc: Exception) -> None:
    """Log one middleware failure (never raises)."""
    try:
        log.warning(
            "event=middleware_failed middleware=%s hook=%s error=%s: %s",
            middleware_name(middleware), hook, type(exc).__name__, exc, exc_info=exc,
        )
    except Exception:  # a broken __str__ must not break the run either
        log.warning("event=middleware_failed middleware=%s hook=%s",
                    type(middleware).__qualname__, hook)


# ------------------------------------------------------------------------------ log context


@dataclass(frozen=True, slots=True)
class LogContext:
    """What the work running in this thread (or task) is about, for log records
    (docs/observability.md, "Structured logs").

    Attributes:
        run_id: the run (the innermost run, step or rollback scope's).
        reactor: its reactor.
        step: the step, inside a step scope.
        job_id: the job, inside a job scope.
        job_kind: its kind.
    """

    run_id: str | None = None
    reactor: str | None = None
    step: str | None = None
    job_id: str | None = None
    job_kind: str | None = None


_LOG_CONTEXT: ContextVar[LogContext | None] = ContextVar("reactor_log_context", default=None)


class _Switches:
    """Process-wide switches (one instance): whether scopes maintain the log context."""

    log_context = False


_SWITCHES = _Switches()


def enable_log_context(enabled: bool = True) -> None:
    """Make every scope (of every runtime in the process) keep :func:`current_log_context`
    up to date, even with no middleware registered
    (:func:`reactor.observability.logging.configure_json_logs` calls it).

    Args:
        enabled: ``False`` turns it off again.
    """
    _SWITCHES.log_context = enabled


def current_log_context() -> LogContext | None:
    """The :class:`LogContext` of the innermost scope running in this thread or task, when
    the log context is enabled (:func:`enable_log_context`); else ``None``."""
    return _LOG_CONTEXT.get()


def _context_of(outer: LogContext | None, event: object) -> LogContext:
    base = outer or LogContext()
    if isinstance(event, StepEvent):
        return LogContext(event.run_id, event.reactor, event.step, base.job_id, base.job_kind)
    if isinstance(event, RunEvent | RollbackEvent):
        return LogContext(event.run_id, event.reactor, None, base.job_id, base.job_kind)
    if isinstance(event, JobEvent):
        return LogContext(event.run_id, event.reactor, event.step, event.job_id, event.kind)
    return base


# ------------------------------------------------------------------------------ the chain

E = TypeVar("E", RunEvent, StepEvent, JobEvent, RollbackEvent)


class Scope(Generic[E]):
    """One scope of a :class:`Hooks` chain: enters the middleware's context managers in
    registration order and exits them in reverse order; sets ``event.duration`` before the
    exits. Entering returns the event; exiting never swallows the work's exception."""

    __slots__ = ("_entered", "_hook", "_middleware", "_started", "_token", "event")

    def __init__(self, middleware: tuple[Middleware, ...], hook: str, event: E) -> None:
        self._middleware = middleware
        self._hook = hook
        self.event: E = event
        self._entered: list[tuple[Middleware, AbstractContextManager[object]]] = []
        self._started = 0.0
        self._token: Token[LogContext | None] | None = None

    def __enter__(self) -> E:
        self._started = time.perf_counter()
        if _SWITCHES.log_context:
            self._token = _LOG_CONTEXT.set(_context_of(_LOG_CONTEXT.get(), self.event))
        for middleware in self._middleware:
            try:
                manager = getattr(middleware, self._hook)(self.event)
                if manager is None:
                    continue
                manager.__enter__()
            except Exception as exc:
                _report(middleware, self._hook, exc)
                continue
            self._entered.append((middleware, manager))
        return self.event

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.event.duration = time.perf_counter() - self._started
        entered, self._entered = self._entered, []
        try:
            for middleware, manager in reversed(entered):
                try:
                    manager.__exit__(exc_type, exc, tb)  # its return value is ignored
                except BaseException as failure:
                    if failure is exc:  # it let the engine's exception through
                        continue
                    if not isinstance(failure, Exception):
                        raise
                    _report(middleware, self._hook, failure)
        finally:
            if self._token is not None:
                _LOG_CONTEXT.reset(self._token)
                self._token = None


class Hooks:
    """The middleware chain a :class:`~reactor.config.Runtime` carries (``runtime.hooks``).

    Args:
        middleware: the middleware, in registration order.
    """

    __slots__ = ("middleware",)

    def __init__(self, middleware: Sequence[Middleware] = ()) -> None:
        self.middleware: tuple[Middleware, ...] = tuple(middleware)

    @property
    def active(self) -> bool:
        """Whether any hook can observe anything: middleware is registered, or the log
        context is enabled (:func:`enable_log_context`). When false, callers build no event."""
        return bool(self.middleware) or _SWITCHES.log_context

    def run(self, event: RunEvent) -> Scope[RunEvent]:
        """The scope of a run segment (see :meth:`Middleware.run`)."""
        return Scope(self.middleware, "run", event)

    def step(self, event: StepEvent) -> Scope[StepEvent]:
        """The scope of a step attempt (see :meth:`Middleware.step`)."""
        return Scope(self.middleware, "step", event)

    def job(self, event: JobEvent) -> Scope[JobEvent]:
        """The scope of a job (see :meth:`Middleware.job`)."""
        return Scope(self.middleware, "job", event)

    def rollback(self, event: RollbackEvent) -> Scope[RollbackEvent]:
        """The scope of a rollback (see :meth:`Middleware.rollback`)."""
        return Scope(self.middleware, "rollback", event)

    def _notify(self, hook: str, event: object) -> None:
        for middleware in self.middleware:
            try:
                getattr(middleware, hook)(event)
            except Exception as exc:
                _report(middleware, hook, exc)

    def park(self, event: ParkEvent) -> None:
        """Notify :meth:`Middleware.on_park`."""
        self._notify("on_park", event)

    def resume(self, event: ResumeEvent) -> None:
        """Notify :meth:`Middleware.on_resume`."""
        self._notify("on_resume", event)

    def dead_letter(self, event: DeadLetterEvent) -> None:
        """Notify :meth:`Middleware.on_dead_letter`."""
        self._notify("on_dead_letter", event)

    def sweep(self, event: SweepEvent) -> None:
        """Notify :meth:`Middleware.on_sweep`."""
        self._notify("on_sweep", event)

    def lock_wait(self, event: LockWaitEvent) -> None:
        """Notify :meth:`Middleware.on_lock_wait`."""
        self._notify("on_lock_wait", event)


#: The chain of a runtime with no middleware.
NO_HOOKS = Hooks()

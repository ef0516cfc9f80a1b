"""Calling user code: ``run``/``undo``/``compensate`` of class and function steps.

Every call goes through :func:`capture`, which

* runs an ``async def`` body's coroutine to completion (:mod:`reactor.engine.coroutines`);
* listens for signals (``fail()``/``halt()``/``skip()``/``succeed()``) and uses their result;
* turns a plain return value into ``Success(value)`` (a result is kept as is);
* turns **any** exception — ``Exception`` or a custom ``BaseException`` subclass,
  ``NotImplementedError`` included — into a ``Failure`` with a trimmed traceback
  (docs/concepts.md, "Rollback");
* lets *interruptions* (:data:`INTERRUPTIONS`) propagate untouched: the executor stores the run
  as ``aborted`` and re-raises (docs/architecture.md, "Execution invariants").
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import math
import os
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reactor.dsl.declarations import StepSpec
from reactor.dsl.inputs import Inputs
from reactor.dsl.step import BaseStep
from reactor.engine import body_threads
from reactor.engine.coroutines import await_result
from reactor.engine.heartbeat_writes import HeartbeatWriter
from reactor.engine.interruptions import INTERRUPTIONS, PASS_THROUGH
from reactor.errors import InputValidationError, StepTimeout, UndeclaredInputError
from reactor.model import signals
from reactor.model.heartbeats import Heartbeats
from reactor.model.results import Failure, Paused, Result, Skipped, Success
from reactor.model.step_context import StepContext

__all__ = [
    "INTERRUPTIONS",
    "AttemptLimit",
    "Invocation",
    "call_class_compensate",
    "call_class_run",
    "call_class_undo",
    "call_compensate",
    "call_run",
    "call_undo",
    "capture",
    "failure_from_exception",
    "trimmed_traceback",
]

#: What a missing function-step undo/compensate "returns": nothing to do.
_NO_HOOK: Result = Skipped()

_log = logging.getLogger("reactor.engine")

_MAX_FRAMES = 50
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # reactor/
_INTERNAL_DIRS = tuple(os.path.join(_PACKAGE_DIR, d) + os.sep for d in ("engine", "dsl", "model"))


@dataclass(frozen=True)
class Invocation:
    """The outcome of one call into user code.

    Attributes:
        result: the result (``Failure`` when it raised).
        raised: ``True`` when the user code raised (as opposed to returning or signalling).
    """

    result: Result
    raised: bool = False


def trimmed_traceback(exc: BaseException) -> str:
    """Format ``exc``'s traceback without reactor's own engine/DSL frames (last 50 frames)."""
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__)
        if not os.path.abspath(f.filename).startswith(_INTERNAL_DIRS)
    ][-_MAX_FRAMES:]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)]
    lines.extend(traceback.format_exception_only(type(exc), exc))
    return "".join(lines)


def failure_from_exception(exc: BaseException) -> Failure:
    """Build the ``Failure`` for an exception raised by user code.

    ``retryable`` is ``False`` for input errors and for exceptions with ``retryable = False``.
    """
    retryable = getattr(exc, "retryable", True) is not False and not isinstance(
        exc, UndeclaredInputError | InputValidationError
    )
    validation = exc.field_errors if isinstance(exc, InputValidationError) else {}
    return Failure(
        exc, retryable=retryable, traceback=trimmed_traceback(exc), validation_errors=validation
    )


def _as_result(returned: Any) -> Result:
    if isinstance(returned, Paused):  # only an interrupt step pauses a run
        return Failure(TypeError(
            "a step cannot return Paused: declare an interrupt step to pause the run "
            "(docs/run-control.md, \"Interrupts\")"
        ), retryable=False)
    return returned if isinstance(returned, Result) else Success(returned)


@dataclass(frozen=True)
class AttemptLimit:
    """The time limit of one attempt of a step body (docs/concepts.md, "Time limits").

    Attributes:
        seconds: how long the attempt may run (``math.inf``: only its heartbeat limit).
        kind: ``"per_attempt"`` or ``"total"`` (which of the step's ``Timeouts`` it is).
        step: the step name.
        attempt: the attempt (1-based).
        heartbeat: seconds the body may go without a heartbeat (docs/concepts.md,
            "Heartbeats"), or ``None``.
        heartbeats: the step's heartbeats (when ``heartbeat`` is set).
        writer: stores the last heartbeat while the attempt runs (in a worker; the thread
            waiting for the body calls it: docs/concepts.md, "Heartbeats"), or ``None``.
    """

    seconds: float
    kind: str
    step: str
    attempt: int
    heartbeat: float | None = None
    heartbeats: Heartbeats | None = None
    writer: HeartbeatWriter | None = None

    def wake_at(self, started: float) -> float:
        """When the thread waiting for the body wakes next: at :meth:`due`, or earlier for
        the :attr:`writer`'s next check."""
        due = self.due(started)
        return due if self.writer is None else min(due, self.writer.next_at())

    def tick(self) -> None:
        """Let the :attr:`writer` store the last heartbeat when it is due (the waiting
        thread calls it at each wake; nothing when there is no writer)."""
        if self.writer is not None:
            self.writer.tick()

    def due(self, started: float) -> float:
        """The ``time.monotonic`` time this attempt, started at ``started``, runs out: its
        limit, or earlier when its body has gone ``heartbeat`` seconds without one."""
        limit_at = started + self.seconds
        if self.heartbeat is None or self.heartbeats is None:
            return limit_at
        return min(limit_at, self.heartbeats.due(self.heartbeat))

    def expired(self, started: float) -> StepTimeout:
        """The attempt, started at ``started``, is given up at its limit: its heartbeats are
        ignored from now on (a plain body runs on after it; docs/concepts.md, "Heartbeats"),
        and the error it fails with is returned (:meth:`error`)."""
        error = self.error(started)
        if self.heartbeats is not None:
            self.heartbeats.abandon(self.attempt)
        return error

    def spelled(self) -> str:
        """The limit in words, for log lines: ``"its time limit of 5s"``, ``"its heartbeat
        limit of 1s"`` or both."""
        if math.isinf(self.seconds):
            return f"its heartbeat limit of {self.heartbeat:g}s"
        if self.heartbeat is not None:
            return (f"its time limit of {self.seconds:g}s or its heartbeat limit of "
                    f"{self.heartbeat:g}s")
        return f"its time limit of {self.seconds:g}s"

    def error(self, started: float | None = None) -> StepTimeout:
        """The error a body that ran past this limit fails with (``started``: when the
        attempt began, to tell a missed heartbeat from the limit itself)."""
        if (
            started is not None and self.heartbeat is not None and self.heartbeats is not None
            and self.heartbeats.due(self.heartbeat) < started + self.seconds
        ):
            return StepTimeout(
                f"step {self.step!r} attempt {self.attempt} went {self.heartbeat:g}s without "
                "a heartbeat", step_name=self.step, limit="heartbeat", seconds=self.heartbeat,
                attempt=self.attempt,
            )
        what = ("its per-attempt limit" if self.kind == "per_attempt"
                else "what was left of its total limit")
        return StepTimeout(
            f"step {self.step!r} attempt {self.attempt} ran past {what} of "
            f"{self.seconds:g}s", step_name=self.step, limit=self.kind,
            seconds=self.seconds, attempt=self.attempt,
        )


def capture(
    fn: Callable[..., Any], *args: Any, limit: AttemptLimit | None = None
) -> Invocation:
    """Call ``fn(*args)`` and convert whatever happens into an :class:`Invocation`.

    With ``limit``, an ``async def`` ``fn`` is cancelled when the limit passes; a plain ``fn``
    runs on a body thread, which the calling thread stops waiting for when the limit passes
    (what it returns later is logged and discarded). A plain ``fn`` that returns a coroutine
    (an ``async def`` under a plain decorator) has it awaited within what is left of the
    limit, and cancelled at it, like an ``async def`` body. Either way the invocation is then
    a ``Failure`` of :class:`~reactor.errors.StepTimeout` (docs/concepts.md, "Time limits").

    Raises:
        KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError, CancelledError: re-raised.
        Park: re-raised (user code inside a worker parked; engine/parks.py).
    """
    started = time.monotonic()
    try:
        with signals.listening():
            if limit is not None and not inspect.iscoroutinefunction(fn):
                returned = _call_on_body_thread(fn, args, limit, started)
            else:
                returned = fn(*args)
            if inspect.iscoroutine(returned):  # an ``async def`` body (docs/concepts.md)
                returned = _await_body(returned, limit, started)
    except signals.StepSignal as sig:
        return Invocation(sig.result)
    except PASS_THROUGH:  # interruptions, and a park giving the worker thread back
        raise
    except BaseException as exc:  # every other exception is a step failure
        return Invocation(failure_from_exception(exc), raised=True)
    return Invocation(_as_result(returned))


def _await_body(coro: Any, limit: AttemptLimit | None, started: float) -> Any:
    """Run an async body's coroutine to its end, within what is left of ``limit`` (measured
    from ``started``, when the call began)."""
    if limit is None:
        return await_result(coro)
    if time.monotonic() >= limit.due(started):  # the plain call that made it used it all
        coro.close()
        raise limit.expired(started)
    return await_result(
        coro, due=lambda: limit.due(started), expired=lambda: limit.expired(started),
        tick=None if limit.writer is None else limit.tick,
    )


def _described(ok: bool, value: Any) -> str:
    """What a body that ended after its limit produced, for the 'discarded' log line (a
    coroutine it returned is closed: it will never be awaited)."""
    if not ok:
        if isinstance(value, signals.StepSignal):
            return type(value.result).__name__
        return type(value).__name__
    if inspect.iscoroutine(value):
        value.close()
        return "an un-awaited coroutine, closed"
    return type(_as_result(value)).__name__


def _call_on_body_thread(
    fn: Callable[..., Any], args: tuple[Any, ...], limit: AttemptLimit, started: float
) -> Any:
    """``fn(*args)`` of a plain body under ``limit``: it runs on a body thread
    (:mod:`reactor.engine.body_threads`, with the caller's context variables) that the caller
    waits for at most ``limit.seconds``; a body that ends later has what it produced logged as
    discarded.

    Returns:
        What ``fn`` returned (a coroutine included: the caller awaits it).

    Raises:
        StepTimeout: the limit passed before the body ended.
        BaseException: what ``fn`` raised (a signal, an interruption, a park, a failure),
            re-raised in the calling thread.
    """
    finished = threading.Lock()  # held until the body ends (a lock waits faster than an Event)
    finished.acquire()
    settle = threading.Lock()  # orders "the body ended" against "the caller gave up"
    ended: list[tuple[bool, Any]] = []
    abandoned: list[bool] = []

    def work() -> None:
        try:
            ended.append((True, fn(*args)))
        except BaseException as exc:  # handed to the caller, which re-raises it
            ended.append((False, exc))
        finally:
            with settle:
                late = bool(abandoned)
            finished.release()
            if late:
                _log.warning(
                    "step %r attempt %d returned after %s: its result (%s) is discarded, "
                    "never recorded (docs/concepts.md, \"Time limits\")",
                    limit.step, limit.attempt, limit.spelled(), _described(*ended[0]),
                )

    context = contextvars.copy_context()  # inside signals.listening(): signals work there
    body_threads.submit(lambda: context.run(work))
    try:
        while True:  # until the body ends or its limit passes (a heartbeat moves it later)
            left = limit.wake_at(started) - time.monotonic()
            done = finished.acquire(timeout=min(max(left, 0.0), threading.TIMEOUT_MAX))
            if done or time.monotonic() >= limit.due(started):
                break
            limit.tick()  # off the body's thread: store its last heartbeat when due
    except BaseException:  # the waiting thread was interrupted (Ctrl-C): the body goes on
        with settle:
            if not ended:
                abandoned.append(True)
        raise
    if not done:
        with settle:
            if not ended:  # still running: give up on it
                abandoned.append(True)
                raise limit.expired(started)
    ok, value = ended[0]
    if ok:
        return value
    raise value


# ----------------------------------------------------------------------------- engine entry


def _class_inputs(cls: type[BaseStep], args: Mapping[str, Any]) -> Inputs:
    return Inputs(args, declared=cls.contract.names)


def call_run(
    spec: StepSpec, args: Mapping[str, Any], ctx: StepContext,
    limit: AttemptLimit | None = None,
) -> Invocation:
    """Run a leaf step's body with already validated ``args`` (within ``limit``, when given:
    :func:`capture`)."""
    if spec.step_class is not None:
        instance = spec.step_class(_class_inputs(spec.step_class, args), ctx)
        return capture(instance.run, limit=limit)
    assert spec.function is not None
    return capture(spec.function, Inputs(args), ctx, limit=limit)


def call_undo(
    spec: StepSpec, args: Mapping[str, Any], result_value: Any, ctx: StepContext
) -> Invocation:
    """Run a leaf step's undo (inputs not validated; defaults applied)."""
    if spec.step_class is not None:
        cls = spec.step_class
        instance = cls(_class_inputs(cls, cls.contract.with_defaults(args)), ctx,
                       result=result_value)
        return capture(instance.undo)
    if spec.undo_function is None:
        return Invocation(_NO_HOOK)
    return capture(spec.undo_function, result_value, Inputs(args), ctx)


def call_compensate(
    spec: StepSpec, args: Mapping[str, Any], failure: Failure, ctx: StepContext
) -> Invocation:
    """Run a leaf step's compensate (inputs not validated; defaults applied)."""
    if spec.step_class is not None:
        cls = spec.step_class
        instance = cls(_class_inputs(cls, cls.contract.with_defaults(args)), ctx,
                       failure=failure)
        return capture(instance.compensate)
    if spec.compensate_function is None:
        return Invocation(_NO_HOOK)
    return capture(spec.compensate_function, failure.error, Inputs(args), ctx)


def has_undo(spec: StepSpec) -> bool:
    """Whether a leaf step defines an undo."""
    if spec.step_class is not None:
        return spec.step_class.has_undo()
    return spec.undo_function is not None


def has_compensate(spec: StepSpec) -> bool:
    """Whether a leaf step defines a compensate."""
    if spec.step_class is not None:
        return spec.step_class.has_compensate()
    return spec.compensate_function is not None


# ----------------------------------------------------------------------------- direct calls


def call_class_run(
    cls: type[BaseStep], args: Mapping[str, Any], ctx: StepContext | None
) -> Result:
    """``Step.call``: validate the contract, then run once (no retries)."""
    try:
        validated = cls.contract.validate(args, step_name=cls.__qualname__)
    except InputValidationError as exc:
        return Failure(exc, retryable=False, validation_errors=exc.field_errors)
    return capture(cls(_class_inputs(cls, validated), ctx).run).result


def call_class_undo(
    cls: type[BaseStep], result_value: Any, args: Mapping[str, Any], ctx: StepContext | None
) -> Result:
    """``Step.call_undo``: run ``undo`` without validating the inputs."""
    instance = cls(_class_inputs(cls, cls.contract.with_defaults(args)), ctx, result=result_value)
    return capture(instance.undo).result


def call_class_compensate(
    cls: type[BaseStep], failure: Failure, args: Mapping[str, Any], ctx: StepContext | None
) -> Result:
    """``Step.call_compensate``: run ``compensate`` without validating the inputs."""
    instance = cls(_class_inputs(cls, cls.contract.with_defaults(args)), ctx, failure=failure)
    return capture(instance.compensate).result


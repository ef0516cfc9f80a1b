"""Early-exit signals for step bodies: ``fail()``, ``halt()``, ``skip()``, ``succeed()``.

Each signal raises a private ``BaseException`` subclass carrying a result. The engine catches it
around ``run``/``undo``/``compensate`` and uses the result as if the body had returned it. Being a
``BaseException`` (not an ``Exception``), a user's ``except Exception:`` cannot swallow it, so a
signal works from any call depth (the Python analogue of Ruby's ``throw``/``catch``,
docs/concepts.md, "Results and signals").

Calling a signal outside a step body (where no engine is listening) raises
:class:`~reactor.errors.SignalOutsideStepError` instead, so the mistake is visible.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NoReturn

from reactor.errors import SignalOutsideStepError
from reactor.model.results import Failure, Halt, Result, Skipped, Success

__all__ = ["StepSignal", "fail", "halt", "listening", "skip", "succeed"]

_listening: ContextVar[int] = ContextVar("reactor_signal_listeners", default=0)


class StepSignal(BaseException):  # noqa: N818 - a control-flow signal, not an error
    """Private carrier of a signal's result (engine-internal; never caught by user code).

    Attributes:
        result: the result the step body "returns" through the signal.
    """

    def __init__(self, result: Result) -> None:
        super().__init__(type(result).__name__)
        self.result = result


@contextmanager
def listening() -> Iterator[None]:
    """Mark the current execution as inside a step body (used by the engine around user code)."""
    token = _listening.set(_listening.get() + 1)
    try:
        yield
    finally:
        _listening.reset(token)


def _raise(result: Result) -> NoReturn:
    if _listening.get() <= 0:
        raise SignalOutsideStepError(
            f"{type(result).__name__.lower()} signal called outside a step body "
            "(run/undo/compensate)"
        )
    raise StepSignal(result)


def fail(error: Any = None, *, retryable: bool = True) -> NoReturn:
    """End the step body with ``Failure(error, retryable=retryable)``.

    Args:
        error: the error (a message string, an exception, or any serialisable value).
        retryable: ``False`` stops the step's retries at once.

    Raises:
        StepSignal: always (caught by the engine).
        SignalOutsideStepError: when called outside a step body.
    """
    _raise(Failure(error, retryable=retryable))


def halt(reason: Any = None) -> NoReturn:
    """End the step body with ``Halt(reason)``: stop the run cleanly without rollback.

    Raises:
        StepSignal: always (caught by the engine).
        SignalOutsideStepError: when called outside a step body.
    """
    _raise(Halt(reason))


def skip(value: Any = None) -> NoReturn:
    """End the step body with ``Skipped(value)``: nothing to do, never undone.

    Raises:
        StepSignal: always (caught by the engine).
        SignalOutsideStepError: when called outside a step body.
    """
    _raise(Skipped(value))


def succeed(value: Any = None) -> NoReturn:
    """End the step body with ``Success(value)``.

    Raises:
        StepSignal: always (caught by the engine).
        SignalOutsideStepError: when called outside a step body.
    """
    _raise(Success(value))

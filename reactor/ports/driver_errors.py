"""Driver exceptions as reactor errors: :class:`translate_errors` and :func:`close_quietly`.

The protocol's error rule (docs/protocol.md, "Conventions"): a backend failure raises
:class:`reactor.errors.StorageError` (a router's: :class:`reactor.errors.RouterError`) with the
driver's exception chained as ``__cause__``, and losing a race is a normal return, never an
exception. :class:`translate_errors` is that rule in one place, so an adapter writes::

    with translate_errors(PyMongoError, what=f"MongoDB write {collection}/{key}"):
        ...

instead of an ``except PyMongoError as exc: raise StorageError(...) from exc`` per operation.
A special case (a conditional-check failure that means "return ``False``") stays an explicit
``except`` inside the block. This module lives in :mod:`reactor.ports`, beside the protocols
whose error rule it implements and :mod:`reactor.ports.urls`, because every adapter needs it,
including the ones that never use :mod:`reactor.generic` (a native store, a router);
docs/protocol.md, "Adapter toolkit".
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import TracebackType
from typing import Literal, ParamSpec, TypeAlias, TypeVar

from reactor.errors import ReactorError, StorageError

__all__ = ["DriverErrors", "close_quietly", "translate_errors"]

#: The driver exception classes to translate: one class or a tuple (as ``except`` takes them).
DriverErrors: TypeAlias = type[BaseException] | tuple[type[BaseException], ...]

_P = ParamSpec("_P")
_R = TypeVar("_R")


class translate_errors:  # noqa: N801 - lower case like contextlib.suppress: used as a verb
    """A context manager (and decorator) that re-raises driver exceptions as a reactor error.

    Inside the block, an exception that is an instance of ``driver_errors`` is re-raised as
    ``into(f"{what} failed: {exc}")`` with the driver's exception chained as ``__cause__``
    (the class name stands in for an empty message). Everything else passes through
    untouched: a :class:`reactor.errors.ReactorError` raised inside (say a
    ``ContextTooLargeError``, even one that also subclasses ``ValueError``), an exception that
    is not a driver error, and a ``BaseException`` that is not an ``Exception``
    (``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit``) even if ``driver_errors`` names
    it. Nothing is ever swallowed.

    One instance holds no state across uses: it may be entered again, and as a decorator
    (``@translate_errors(RedisError, what="redis ping")``) it wraps every call of a plain
    (non-generator) function.

    A class-based context manager costs a few hundred nanoseconds per use; the Redis adapter's
    lock and rate-limit hot paths keep a bare ``try``/``except`` for that reason
    (docs/adapters/redis.md).

    Args:
        driver_errors: the driver's exception class or classes, e.g. ``PyMongoError`` or
            ``(ClientError, BotoCoreError)``.
        what: the operation, for the message, e.g. ``"MongoDB write contexts/r1"``.
        into: the reactor error to raise; default :class:`reactor.errors.StorageError`
            (a router passes :class:`reactor.errors.RouterError`).

    Raises:
        ReactorError: ``into``, from the ``with`` block, for a driver exception.
    """

    __slots__ = ("_driver_errors", "_into", "_what")

    def __init__(
        self,
        driver_errors: DriverErrors,
        *,
        what: str,
        into: type[ReactorError] = StorageError,
    ) -> None:
        self._driver_errors = driver_errors
        self._what = what
        self._into = into

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> Literal[False]:
        if (
            exc is None
            or isinstance(exc, ReactorError)
            or not isinstance(exc, Exception)
            or not isinstance(exc, self._driver_errors)
        ):
            return False
        raise self._into(f"{self._what} failed: {str(exc) or type(exc).__name__}") from exc

    def __call__(self, function: Callable[_P, _R]) -> Callable[_P, _R]:
        """Wrap ``function`` so every call runs inside this context manager."""

        @functools.wraps(function)
        def translated(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            with self:
                return function(*args, **kwargs)

        return translated


def close_quietly(*closers: Callable[[], object]) -> None:
    """Call each closer in order, ignoring any ``Exception`` it raises.

    For ``close()`` methods, which must never raise (docs/protocol.md, "Storage": calling
    ``close`` twice is harmless): one failing closer does not stop the next.
    ``KeyboardInterrupt`` and other ``BaseException`` that are not ``Exception`` propagate.

    Args:
        *closers: callables taking no argument, e.g. ``stream.close``, ``pubsub.unsubscribe``.
    """
    for close in closers:
        try:
            close()
        except Exception:  # closing must never raise
            pass

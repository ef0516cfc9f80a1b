"""Waits that hand the thread back: an execution suspended, not blocked, while an async step
body awaits (docs/workers.md, "Async slots").

The engine is synchronous: a thread that runs a step whose body is ``async def`` waits for it
(:func:`reactor.engine.coroutines.await_result`). A worker with async slots runs some jobs as
*suspendable executions* on a thread of its own (:mod:`reactor.jobs.async_slots`) and binds a
:class:`Handback` around each of them; where such an execution would block its thread — for
an async body, or through a retry wait — it asks the handback to suspend it instead. The
thread then runs the other executions it hosts and resumes this one, on the same thread, when
it is woken or when the wait's time passes. Every rule the blocked wait keeps (time limits,
heartbeats, cancellation, what a failure does) is the same code either way: only *how the
thread waits* changes.

Without a bound handback (a plain worker thread, a synchronous run, a body thread the
execution's context variables were copied to) every wait blocks its thread, as before.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

__all__ = ["Handback", "bound", "current", "sleeper", "wait_event"]


@runtime_checkable
class Handback(Protocol):
    """What suspends an execution in place of a blocking wait (docs/workers.md, "Async
    slots"). Implemented by the worker's slot host (:mod:`reactor.jobs.async_slots`)."""

    def usable(self) -> bool:
        """Whether the calling code runs in an execution this handback can suspend (on its
        thread, inside one of its executions; never a thread the execution's context
        variables were copied to)."""
        ...

    def waker(self, source: object) -> Callable[[], None]:
        """A function any thread may call, once or more, to resume the calling execution
        when it is suspended on ``source`` (a wake for another wait is ignored).

        Args:
            source: what the execution will wait on (:meth:`suspend`).
        """
        ...

    def suspend(self, source: object, seconds: float | None) -> None:
        """Suspend the calling execution, handing its thread back, until the waker of
        ``source`` is called or ``seconds`` pass (``None``: no time limit), whichever comes
        first. It returns on the same thread; the caller re-checks what it waits for.

        Args:
            source: what the execution waits on.
            seconds: the longest wait, in seconds.
        """
        ...


_bound: contextvars.ContextVar[Handback | None] = contextvars.ContextVar(
    "reactor_handback", default=None
)


def current() -> Handback | None:
    """The handback that can suspend the calling code, else ``None`` (then waits block)."""
    handback = _bound.get()
    if handback is None or not handback.usable():
        return None
    return handback


@contextmanager
def bound(handback: Handback | None) -> Iterator[None]:
    """Let the waits in this block suspend through ``handback`` (``None``: block, as without
    one).

    Args:
        handback: the slot host's handback of this execution.
    """
    token = _bound.set(handback)
    try:
        yield
    finally:
        _bound.reset(token)


def wait_event(
    done: threading.Event, subscribe: Callable[[Callable[[], None]], None],
    seconds: float | None,
) -> bool:
    """Wait up to ``seconds`` for ``done``, as ``done.wait(seconds)`` does; through the bound
    handback, when there is one, the thread handed back meanwhile.

    Args:
        done: the event.
        subscribe: makes the setter of ``done`` call the given function once it is set (at
            once when it is set already); a later subscription may replace an earlier one.
        seconds: the longest wait, in seconds (``None``: until set).

    Returns:
        Whether ``done`` is set.
    """
    handback = current()
    if handback is None:
        return done.wait(seconds)
    if done.is_set():
        return True
    subscribe(handback.waker(done))
    handback.suspend(done, seconds)
    return done.is_set()


def sleeper(sleep: Callable[[float], None]) -> Callable[[float], None]:
    """``sleep``, or, inside an execution a handback can suspend, a wait of the same seconds
    that hands the thread back (a retry wait of a unit in an async slot; docs/workers.md,
    "Async slots"). Give it only a sleep of the system clock: a test clock's sleep moves the
    clock instead of waiting and is kept as it is.

    Args:
        sleep: the blocking wait (seconds).

    Returns:
        The wait to use (seconds).
    """

    def wait(seconds: float) -> None:
        handback = current()
        if handback is None:
            sleep(seconds)
            return
        until = time.monotonic() + max(float(seconds), 0.0)
        token = object()  # this wait's own source: nothing but its time resumes it
        while (left := until - time.monotonic()) > 0:
            handback.suspend(token, left)

    return wait

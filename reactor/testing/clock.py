"""``TestClock``: the one clock of a test environment, moved only by the test.

A :class:`TestClock` is the clock of the environment's in-memory storage and router (stored
timestamps, TTL expiries, lock leases, job delays and retries are all judged by it) and the
runtime's :class:`reactor.ports.Clock` (:attr:`reactor.config.Runtime.clock`), so every wait
of the engine goes through it. It moves only when told to (:meth:`TestClock.advance`), or
when the engine waits in the caller (:meth:`TestClock.sleep`: the retry waits of a
synchronous run, coordination waits, a synchronous reader's wait for an ``async_step``), so
nothing in a test really waits (docs/testing.md, "The clock").
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

from reactor.memory.clock import ManualClock

__all__ = ["DEFAULT_START", "TestClock"]

#: The clock's default start, in epoch seconds (2023-11-14T22:13:20Z): a fixed instant, so
#: stored timestamps are reproducible from one test run to the next.
DEFAULT_START = 1_700_000_000.0


def _seconds(name: str, value: float) -> float:
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    return seconds


class TestClock:
    """A clock in epoch seconds that moves only when the test moves it.

    Call it (``clock()``) or use :meth:`now` to read it; it implements
    :class:`reactor.ports.Clock` (:meth:`now`, :meth:`monotonic`, :meth:`sleep`), so
    ``reactor.configure(clock=TestClock())`` works too. Used on its own (``TestClock()``),
    :meth:`advance` only moves time; the clock of a :class:`reactor.testing.TestEnvironment`
    (``env.clock``) also runs every job that became due on the way (docs/testing.md, "The
    clock").

    Args:
        start: the initial time in epoch seconds (default :data:`DEFAULT_START`).

    Attributes:
        sleeps: every wait the engine asked for through :meth:`sleep` (retry waits,
            coordination waits and reader waits in the caller), in seconds, oldest first.

    Raises:
        ValueError: ``start`` is not a finite number.
    """

    __test__ = False  # not a pytest test class, whatever module imports it

    def __init__(self, start: float = DEFAULT_START) -> None:
        if not math.isfinite(float(start)):
            raise ValueError(f"start must be a finite epoch time in seconds, got {start!r}")
        self._manual = ManualClock(float(start))
        self._lock = threading.Lock()
        self._runner: Callable[[float], None] | None = None
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        """The current time in epoch seconds."""
        return self._manual()

    def now(self) -> float:
        """The current time in epoch seconds."""
        return self._manual()

    def monotonic(self) -> float:
        """The current time in seconds, for intervals: the same reading as :meth:`now` (this
        clock never goes backwards)."""
        return self._manual()

    def advance(self, seconds: float) -> float:
        """Move the clock forward by ``seconds`` and return the new time (epoch seconds).

        On an environment's clock, every job that becomes due on the way runs, at its own due
        time and in due order: retries waiting in the router, delayed jobs, parked async steps
        and readers, and jobs retried by the worker after an error. Leases and TTLs (liveness
        locks, stored runs, coordination holds) expire as the time passes them.

        Args:
            seconds: how far to move, in seconds (``0`` runs the jobs due now).

        Returns:
            The new time in epoch seconds.

        Raises:
            ValueError: ``seconds`` is negative or not finite.
            NotIdleError: (environment clock) the jobs due on the way kept re-enqueueing
                themselves past the environment's job bound.
        """
        target = self.now() + _seconds("seconds", seconds)
        runner = self._runner
        if runner is None:
            self._move_to(target)
        else:
            runner(target)
        return self.now()

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` without waiting: record the wait in :attr:`sleeps` and move the
        clock forward by it, running no job.

        A :class:`reactor.testing.TestEnvironment` makes this clock the runtime's, so the
        engine's waits in the caller (retry waits, coordination waits, reader waits) take no
        real time; jobs that become due meanwhile run at the next :meth:`advance` or
        ``run_until_idle()``.

        Args:
            seconds: the wait, in seconds (a negative wait counts as 0).
        """
        seconds = max(float(seconds), 0.0)
        with self._lock:
            self.sleeps.append(seconds)
        if math.isfinite(seconds):
            self._manual.advance(seconds)

    # -- used by the environment ---------------------------------------------------------------

    def _move_to(self, when: float) -> None:
        """Jump to ``when`` (epoch seconds) when it is later than now; never move back."""
        if when > self._manual():
            self._manual.set(when)

    def _attach(self, runner: Callable[[float], None] | None) -> None:
        """Make :meth:`advance` call ``runner(target)`` instead of just moving the time
        (``None``: detach)."""
        self._runner = runner

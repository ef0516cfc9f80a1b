"""The clock: where the engine reads the time and waits (docs/testing.md, "The clock").

One :class:`Clock` is carried by the runtime (:attr:`reactor.config.Runtime.clock`, set with
``reactor.configure(clock=...)``; default :data:`SYSTEM_CLOCK`). Every wait and interval the
engine measures in the caller's process goes through it: the waits between retry attempts,
coordination waits and their polls, a synchronous reader's wait for an ``async_step``, and
``DispatchHandle.wait``. A test installs a fake one instead of patching modules; the testing
kit's :class:`reactor.testing.TestClock` is one (docs/testing.md, "The clock").

What a storage stores and compares (timestamps, TTLs, leases) stays on the storage's own clock
(``Storage.now()``: the server's clock on Redis and MongoDB); adapters and in-process
components that take a clock argument accept ``None`` for "the system clock, read at call
time", so nothing binds :func:`time.time` or :func:`time.sleep` when a module is imported
(docs/architecture.md, "Layers").

All values are seconds (floats).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = [
    "SYSTEM_CLOCK",
    "CalibratedClock",
    "Clock",
    "SystemClock",
    "monotonic_reader",
    "sleeper",
    "wall_reader",
]


@runtime_checkable
class Clock(Protocol):
    """The time source and the way to wait, in seconds.

    Implement all three methods; a fake for tests typically keeps one number that
    :meth:`sleep` moves forward (docs/testing.md, "The clock").
    """

    def now(self) -> float:
        """The wall-clock time in epoch seconds (may jump when the system clock is set)."""
        ...

    def monotonic(self) -> float:
        """A reading in seconds that never goes backwards, for measuring intervals and
        deadlines (only differences between two readings mean anything)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a fake clock moves its own time forward instead of waiting)."""
        ...


class SystemClock:
    """The process's real clock: :func:`time.time`, :func:`time.monotonic` and
    :func:`time.sleep`, each looked up when called (not when this module was imported), so
    a test that patches the :mod:`time` module is honoured. Implements :class:`Clock`.
    """

    def now(self) -> float:
        """``time.time()``: the wall-clock time in epoch seconds."""
        return time.time()

    def monotonic(self) -> float:
        """``time.monotonic()``: seconds on a clock that never goes backwards."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        """``time.sleep(seconds)``; a negative wait returns at once."""
        time.sleep(max(float(seconds), 0.0))

    def __repr__(self) -> str:
        return "SystemClock()"


#: The default clock of every runtime (:class:`SystemClock`).
SYSTEM_CLOCK: SystemClock = SystemClock()


def wall_reader(clock: Callable[[], float] | Clock | None) -> Callable[[], float]:
    """The epoch-seconds reader a component keeps for a ``clock`` constructor argument.

    Args:
        clock: ``None`` (the system clock, read at call time), a :class:`Clock` (its
            :meth:`~Clock.now`), or a callable returning epoch seconds (e.g.
            :class:`reactor.memory.ManualClock`).

    Returns:
        A function returning epoch seconds.
    """
    if clock is None:
        return SYSTEM_CLOCK.now
    if isinstance(clock, Clock):
        return clock.now
    return clock


def monotonic_reader(clock: Callable[[], float] | Clock | None) -> Callable[[], float]:
    """The monotonic-seconds reader a component keeps for a ``clock``/``monotonic`` argument.

    Args:
        clock: ``None`` (the system's monotonic clock, read at call time), a :class:`Clock`
            (its :meth:`~Clock.monotonic`), or a callable returning seconds.

    Returns:
        A function returning monotonic seconds.
    """
    if clock is None:
        return SYSTEM_CLOCK.monotonic
    if isinstance(clock, Clock):
        return clock.monotonic
    return clock


def sleeper(sleep: Callable[[float], None] | Clock | None) -> Callable[[float], None]:
    """The wait function a component keeps for a ``sleep`` constructor argument.

    Args:
        sleep: ``None`` (the system's sleep, looked up at call time), a :class:`Clock` (its
            :meth:`~Clock.sleep`), or a callable taking seconds.

    Returns:
        A function waiting the given seconds.
    """
    if sleep is None:
        return SYSTEM_CLOCK.sleep
    if isinstance(sleep, Clock):
        return sleep.sleep
    return sleep


class CalibratedClock:
    """A server's clock read cheaply: the local wall clock plus the server's offset, measured
    every ``refresh_seconds`` (adapter toolkit; docs/writing-an-adapter.md, "Clocks").

    Asking a server for the time on every ``now()`` would add a round trip to every
    timestamp the engine writes. Instead each calibration reads the server clock once and
    measures ``offset = server - (t_sent + t_received) / 2``; ``now()`` is then
    ``wall() + offset``. One calibration is off by at most half its round trip plus the
    server clock's resolution; an offset smaller than that uncertainty counts as zero (the
    clocks agree as far as can be measured). ``now()`` never goes backwards within a process.

    Args:
        read_server: one round trip returning the server's epoch seconds; it raises the
            adapter's ``StorageError`` when the server fails.
        resolution: the server clock's resolution in seconds (added to the uncertainty and,
            halved, to a truncated reading: 1e-6 for Redis ``TIME``, 1e-3 for MongoDB).
        refresh_seconds: seconds between calibrations (> 0).
        wall: the local wall clock (epoch seconds): a callable or a :class:`Clock`; ``None``:
            the system clock, read at call time.

    Raises:
        ValueError: ``refresh_seconds`` or ``resolution`` is not a positive number.
    """

    def __init__(
        self,
        read_server: Callable[[], float],
        *,
        resolution: float,
        refresh_seconds: float = 60.0,
        wall: Callable[[], float] | Clock | None = None,
    ) -> None:
        if not refresh_seconds > 0:
            raise ValueError(f"refresh_seconds must be > 0, got {refresh_seconds!r}")
        if not resolution > 0:
            raise ValueError(f"resolution must be > 0, got {resolution!r}")
        self._read_server = read_server
        self._resolution = resolution
        self._refresh = refresh_seconds
        self._wall = wall_reader(wall)
        self._lock = threading.Lock()
        self._offset = 0.0
        self._calibrated_at: float | None = None
        self._last = 0.0

    @property
    def offset(self) -> float:
        """The last measured server-minus-local offset in seconds (0 before a calibration)."""
        return self._offset

    def calibrate(self) -> float:
        """Measure the server's offset now (one round trip) and return it, in seconds.

        Raises:
            whatever ``read_server`` raises (the adapter's ``StorageError``).
        """
        sent = self._wall()
        server = self._read_server() + self._resolution / 2
        received = self._wall()
        midpoint = (sent + received) / 2
        uncertainty = (received - sent) / 2 + self._resolution
        offset = server - midpoint
        with self._lock:
            self._offset = 0.0 if abs(offset) <= uncertainty else offset
            self._calibrated_at = received
            return self._offset

    def now(self) -> float:
        """The server's clock in epoch seconds (calibrating first when due; never decreasing
        within this process).

        Raises:
            whatever ``read_server`` raises when a calibration is due and fails.
        """
        wall = self._wall()
        if self._calibrated_at is None or wall - self._calibrated_at >= self._refresh:
            self.calibrate()
            wall = self._wall()
        with self._lock:
            value = max(wall + self._offset, self._last)
            self._last = value
            return value

"""A fake :class:`reactor.ports.Clock` for the core's tests (docs/testing.md, "The clock").

Installed with ``reactor.configure(..., clock=FakeClock())``: every wait of the engine (retry
waits, coordination waits, reader waits) is recorded and moves the clock instead of sleeping.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["FakeClock"]


class FakeClock:
    """A clock whose time moves only when something sleeps on it.

    Args:
        start: :meth:`now` at the start, in epoch seconds (:meth:`monotonic` starts at 0).
        on_sleep: called with the seconds of every :meth:`sleep`, after the clock moved (e.g.
            to let another holder go while a caller waits).

    Attributes:
        sleeps: every wait, in seconds, oldest first.
    """

    def __init__(
        self, start: float = 1_700_000_000.0, on_sleep: Callable[[float], None] | None = None
    ) -> None:
        self.start = start
        self.elapsed = 0.0
        self.sleeps: list[float] = []
        self.on_sleep = on_sleep
        self._lock = threading.Lock()

    def now(self) -> float:
        """Epoch seconds: ``start`` plus the time slept so far."""
        with self._lock:
            return self.start + self.elapsed

    def monotonic(self) -> float:
        """Seconds slept so far."""
        with self._lock:
            return self.elapsed

    def sleep(self, seconds: float) -> None:
        """Record the wait and move the clock by it; no real time passes."""
        seconds = max(float(seconds), 0.0)
        with self._lock:
            self.sleeps.append(seconds)
            self.elapsed += seconds
        if self.on_sleep is not None:
            self.on_sleep(seconds)

    @property
    def slept(self) -> float:
        """The total of every wait, in seconds."""
        with self._lock:
            return sum(self.sleeps)

"""A manual clock for deterministic tests of expiry, leases and delays.

Every in-process component of :mod:`reactor.memory` takes an injectable ``clock`` (epoch
seconds: a ``() -> float`` callable or a :class:`reactor.ports.Clock`; default the system
clock, read at call time). :class:`ManualClock` is such a callable that only moves when told
to, so tests never sleep on a TTL (docs/testing.md, "The clock"). It is a storage clock only:
the engine's waits go through the runtime's :class:`reactor.ports.Clock`.
"""

from __future__ import annotations

import threading

__all__ = ["ManualClock"]


class ManualClock:
    """A clock that starts at ``start`` and moves only through :meth:`advance` or :meth:`set`.

    Args:
        start: the initial time in epoch seconds (default 1_700_000_000.0, a fixed instant so
            derived values are reproducible).

    Thread-safe: readers and the advancing thread may run concurrently.
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def __call__(self) -> float:
        """Return the current manual time in epoch seconds."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move the clock forward by ``seconds`` and return the new time.

        Raises:
            ValueError: ``seconds`` is negative (time never runs backwards).
        """
        if seconds < 0:
            raise ValueError(f"a manual clock only moves forward, got {seconds!r}")
        with self._lock:
            self._now += seconds
            return self._now

    def set(self, now: float) -> None:
        """Jump to ``now`` epoch seconds.

        Raises:
            ValueError: ``now`` is earlier than the current time.
        """
        with self._lock:
            if now < self._now:
                raise ValueError(f"a manual clock only moves forward ({now!r} < {self._now!r})")
            self._now = float(now)

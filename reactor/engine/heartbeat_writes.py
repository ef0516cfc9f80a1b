"""Writing a step's last heartbeat to the store while its attempt runs (docs/concepts.md,
"Heartbeats").

A body's ``ctx.heartbeat(details)`` only records the call in memory
(:class:`reactor.model.heartbeats.Heartbeats`). In a worker, the thread that waits for the body
— the run's executor thread, never the body's own — also asks a :class:`HeartbeatWriter`, each
time it wakes, whether the last heartbeat is due to be stored: coalesced to at most one write
every :func:`write_interval` seconds (a third of the heartbeat limit, never less than a second),
and only when the body beat since the last write. The write itself is the caller's: in a worker
the run's fenced checkpoint, which the executor thread is the only writer of (docs/workers.md,
"Stale writers and fenced saves"), so a heartbeat write never overwrites a newer checkpoint.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from reactor.errors import LockLost
from reactor.model.heartbeats import Heartbeats, LastHeartbeat

__all__ = ["MIN_WRITE_INTERVAL", "HeartbeatWriter", "write_interval"]

_log = logging.getLogger("reactor.engine")

#: The least time between two heartbeat writes of one step (seconds).
MIN_WRITE_INTERVAL = 1.0


def write_interval(heartbeat: float) -> float:
    """Seconds between two heartbeat writes of a step declared ``Timeouts(heartbeat=...)``.

    Args:
        heartbeat: the step's heartbeat limit, in seconds.

    Returns:
        A third of ``heartbeat``, never less than :data:`MIN_WRITE_INTERVAL` (docs/concepts.md,
        "Heartbeats").
    """
    return max(heartbeat / 3.0, MIN_WRITE_INTERVAL)


def _monotonic() -> float:
    return time.monotonic()


class HeartbeatWriter:
    """Stores a step's last heartbeat while its attempt runs, at most once per
    :attr:`interval` (docs/concepts.md, "Heartbeats"). Not thread-safe: one waiting thread
    calls :meth:`tick`.

    Args:
        step: the step name (for the log).
        beats: the step's heartbeats (what its body calls record).
        interval: seconds between two writes (:func:`write_interval`).
        write: stores one heartbeat; it may raise (a failed write is logged and tried again at
            the next interval; after :class:`~reactor.errors.LockLost`, the run is no longer
            this execution's and nothing more is written).
        monotonic: the clock of :attr:`interval` (seconds); ``None``: ``time.monotonic``, the
            clock the attempt's limit is waited on.
    """

    __slots__ = ("_beats", "_monotonic", "_next", "_step", "_stopped", "_write", "_written",
                 "interval", "writes")

    def __init__(
        self, step: str, beats: Heartbeats, interval: float,
        write: Callable[[LastHeartbeat], None], *,
        monotonic: Callable[[], float] | None = None,
    ) -> None:
        self._step = step
        self._beats = beats
        self.interval = interval
        self._write = write
        self._monotonic: Callable[[], float] = monotonic if monotonic is not None else _monotonic
        # the heartbeat the store already holds (one kept by an earlier execution, or none)
        self._written: LastHeartbeat | None = beats.last
        self._next = self._monotonic() + interval
        self._stopped = False
        #: How many heartbeats this writer stored.
        self.writes = 0

    def next_at(self) -> float:
        """The monotonic time of the next check (``math.inf`` once writing stopped)."""
        return float("inf") if self._stopped else self._next

    def tick(self) -> None:
        """Store the last heartbeat when a check is due and the body beat since the last
        write; otherwise nothing (no I/O). Never raises: a failed write is logged."""
        if self._stopped:
            return
        now = self._monotonic()
        if now < self._next:
            return
        self._next = now + self.interval
        last = self._beats.last
        if last is None or last is self._written:
            return
        try:
            self._write(last)
        except LockLost as exc:  # the run is another execution's now: write nothing more
            self._stopped = True
            _log.warning("event=heartbeat_write_stopped step=%s error=%s: %s",
                         self._step, type(exc).__name__, exc)
            return
        except Exception as exc:  # tried again at the next interval
            _log.warning("event=heartbeat_write_failed step=%s error=%s: %s",
                         self._step, type(exc).__name__, exc)
            return
        self._written = last
        self.writes += 1

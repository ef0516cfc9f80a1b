"""Step heartbeats: a long step body's "still alive, here is my progress" (docs/concepts.md,
"Heartbeats").

A body calls ``ctx.heartbeat(details)``; the engine keeps the last call in a
:class:`Heartbeats` of the step (memory only: a call costs a lock and two assignments, and
writes nothing). A step declared ``Timeouts(heartbeat=...)`` fails its attempt with
``StepTimeout`` when its body goes that long without one; the next attempt (in this
execution, or after a worker re-enqueued the retry: the last heartbeat is kept in the run's
``retry_context``) reads the last one as ``ctx.last_heartbeat`` and can resume where it
stopped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reactor.errors import DeserializationError

__all__ = ["Heartbeats", "LastHeartbeat"]


@dataclass(frozen=True, slots=True)
class LastHeartbeat:
    """The last heartbeat of a step (docs/concepts.md, "Heartbeats").

    Attributes:
        details: what the body passed to ``ctx.heartbeat`` (``None`` when nothing).
        at: epoch seconds (wall clock) of the call.
        attempt: the attempt that made it (1-based).
    """

    details: Any
    at: float
    attempt: int

    def to_stored(self) -> dict[str, Any]:
        """The stored form ``{"details", "at", "attempt"}``."""
        return {"details": self.details, "at": self.at, "attempt": self.attempt}

    @classmethod
    def from_stored(cls, raw: Any, where: str) -> LastHeartbeat:
        """Read the stored form.

        Raises:
            DeserializationError: ``raw`` is no object, ``at`` no number or ``attempt`` no
                integer (the message names ``where``).
        """
        if not isinstance(raw, Mapping):
            raise DeserializationError(f"{where} must be an object, got {type(raw).__name__}")
        at, attempt = raw.get("at"), raw.get("attempt")
        if isinstance(at, bool) or not isinstance(at, int | float):
            raise DeserializationError(f"{where} field 'at' must be a number")
        if isinstance(attempt, bool) or not isinstance(attempt, int):
            raise DeserializationError(f"{where} field 'attempt' must be an integer")
        return cls(raw.get("details"), float(at), attempt)


def _monotonic() -> float:
    return time.monotonic()


def _wall() -> float:
    return time.time()


class Heartbeats:
    """The heartbeats of one step over its attempts in one execution: the last call, and
    when the attempt in progress last showed life (thread-safe; docs/concepts.md,
    "Heartbeats").

    Args:
        last: the last heartbeat of an earlier execution (kept in ``retry_context``), or
            ``None``.
        monotonic: the clock that times the heartbeat limit (seconds); ``None``:
            ``time.monotonic``, read at each call.
        wall: the clock of :attr:`LastHeartbeat.at` (epoch seconds); ``None``: ``time.time``,
            read at each call.
    """

    __slots__ = ("_abandoned", "_alive_at", "_attempt", "_last", "_lock", "_monotonic", "_wall")

    def __init__(
        self, last: LastHeartbeat | None = None, *,
        monotonic: Callable[[], float] | None = None, wall: Callable[[], float] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._last = last
        # None: the system clocks, read at call time (docs/testing.md, "The clock")
        self._monotonic: Callable[[], float] = monotonic if monotonic is not None else _monotonic
        self._wall: Callable[[], float] = wall if wall is not None else _wall
        self._attempt = 0
        self._abandoned = False
        self._alive_at = self._monotonic()

    @property
    def last(self) -> LastHeartbeat | None:
        """The last heartbeat of any attempt, or ``None``."""
        return self._last

    def start(self, attempt: int) -> LastHeartbeat | None:
        """Start attempt ``attempt`` (it shows life now).

        Returns:
            The last heartbeat before it (what the attempt reads as ``ctx.last_heartbeat``).
        """
        with self._lock:
            self._attempt = attempt
            self._abandoned = False
            self._alive_at = self._monotonic()
            return self._last

    def abandon(self, attempt: int) -> None:
        """The engine gave attempt ``attempt`` up at its limit: its later calls (a plain body
        runs on after it, an ``async def`` one in its grace) are ignored until the next
        attempt starts — they neither become the last heartbeat nor keep anything alive.

        Args:
            attempt: the attempt given up (1-based); another attempt's number changes nothing.
        """
        with self._lock:
            if attempt == self._attempt:
                self._abandoned = True

    def beat(self, details: Any = None, attempt: int | None = None) -> None:
        """Record a heartbeat of the attempt in progress (no I/O).

        Args:
            details: the body's progress.
            attempt: the attempt making the call (``ctx.attempt``); a call of an earlier
                attempt, or of the attempt in progress once the engine gave it up at its
                limit (:meth:`abandon`: a plain body that timed out runs on, even before the
                next attempt starts), is ignored: it neither keeps an attempt alive nor becomes
                the last heartbeat.
        """
        with self._lock:
            if self._abandoned or (attempt is not None and attempt != self._attempt):
                return
            self._alive_at = self._monotonic()
            self._last = LastHeartbeat(details, self._wall(), self._attempt)

    def due(self, interval: float) -> float:
        """The monotonic time at which the attempt in progress, silent since its last sign of
        life, has gone ``interval`` seconds without a heartbeat."""
        with self._lock:
            return self._alive_at + interval

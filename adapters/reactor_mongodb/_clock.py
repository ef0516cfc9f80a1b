"""The MongoDB adapter's clock: the application clock corrected by the server's offset.

MongoDB storage judges expiry by the server clock (``$$NOW``; docs/protocol.md#conventions). Asking
the server for the time on every :meth:`ServerClock.now` call would double the round trips of every
compare-and-set (the generic stores read the clock before each write), so the clock is *calibrated*
instead: every ``refresh_seconds`` the adapter runs ``hello`` (one round trip it would make anyway
for monitoring), reads the server's ``localTime`` and measures

    offset = localTime - (t_sent + t_received) / 2

``now()`` is then ``time.time() + offset``. The error of one calibration is at most half the
round trip plus the millisecond precision of ``localTime``; an offset smaller than that
uncertainty is treated as zero (the clocks agree as far as can be measured), so on a host that
is NTP-synchronised with the server the result is simply the application clock. ``now()`` never
goes backwards across calibrations.

mongomock has no ``hello`` command; in-process test backends use ``mode="application"``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pymongo.errors import PyMongoError

from reactor.errors import StorageError
from reactor.ports.clock import CalibratedClock, Clock, wall_reader
from reactor.ports.driver_errors import translate_errors

__all__ = ["ServerClock"]


class ServerClock:
    """Epoch seconds on the MongoDB server's clock, measured cheaply (see the module docstring).

    Args:
        command: runs one admin command and returns its reply (``client.admin.command``).
        mode: ``"server"`` (calibrate against ``hello.localTime``) or ``"application"`` (use
            ``wall`` as is; mongomock, or a deployment that wants the app clock).
        refresh_seconds: seconds between calibrations in ``"server"`` mode.
        wall: the local wall clock (epoch seconds): a callable or a
            :class:`reactor.ports.Clock`, injectable for tests; default ``None``: the system
            clock, read at call time.

    Raises:
        ValueError: an unknown ``mode`` or a non-positive ``refresh_seconds``.

    The calibration itself is :class:`reactor.ports.clock.CalibratedClock`'s (shared with the
    Redis adapter's ``TIME``-based clock).
    """

    def __init__(
        self,
        command: Callable[[str], Any],
        *,
        mode: str = "server",
        refresh_seconds: float = 60.0,
        wall: Callable[[], float] | Clock | None = None,
    ) -> None:
        if mode not in ("server", "application"):
            raise ValueError(f"clock mode must be 'server' or 'application', got {mode!r}")
        self._command = command
        self.mode = mode
        self._wall = wall_reader(wall)
        self._calibrated = CalibratedClock(
            self._server_time, resolution=0.001, refresh_seconds=refresh_seconds, wall=wall
        )

    @property
    def offset(self) -> float:
        """The last measured server-minus-application offset in seconds (0 in app mode)."""
        return self._calibrated.offset

    def _server_time(self) -> float:
        """The server's ``hello.localTime`` in epoch seconds (truncated to the millisecond).

        Raises:
            StorageError: the ``hello`` command failed or returned no ``localTime``.
        """
        with translate_errors(PyMongoError, what="MongoDB clock calibration"):
            reply = self._command("hello")
        server = reply.get("localTime") if isinstance(reply, dict) else None
        if not isinstance(server, datetime):
            raise StorageError("MongoDB 'hello' reply has no localTime; use clock=application")
        if server.tzinfo is None:
            server = server.replace(tzinfo=UTC)
        return server.timestamp()

    def calibrate(self) -> float:
        """Measure the server's offset now and return it (seconds).

        Raises:
            StorageError: the ``hello`` command failed or returned no ``localTime``.
        """
        return self._calibrated.calibrate()

    def now(self) -> float:
        """The server's clock in epoch seconds (``"server"`` mode: never decreasing within
        this process), or the application clock as it reads (``"application"`` mode)."""
        if self.mode == "application":
            return self._wall()
        return self._calibrated.now()

"""When a schedule ticks: cron expressions and fixed periods, in UTC epoch seconds
(docs/schedules.md, "When a schedule ticks").

A :class:`TickRule` answers "the first tick strictly after ``t``" and "the last tick at or
before ``t``" for one schedule, every time in epoch seconds (UTC). Cron expressions are parsed
and iterated by the ``cronsim`` library in the schedule's IANA time zone (``zoneinfo``); its
daylight-saving rules are Debian cron's:

* an expression at a fixed time of day (its minute and hour fields are not ``*`` or ``*/n``),
  e.g. ``30 2 * * *``: a wall time that does not exist (the spring-forward hour) runs at the
  first minute after the gap (03:00 in Europe/Paris); a wall time that happens twice (the
  fall-back hour) runs once, at its first occurrence;
* any other expression (``*/15 * * * *``, ``0 * * * *``) follows real time: ticks in the
  skipped hour do not exist, ticks in the repeated hour happen twice (an hour apart in UTC).

Ticks are strictly increasing in UTC. A period (``every``) ticks at the multiples of its length
since the Unix epoch (``every=3600`` on every UTC hour), whatever the time zone.

:func:`jitter_for` gives the deterministic delay of one tick, the same in every process.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from reactor.errors import ScheduleValueError

__all__ = [
    "CRON_ALIASES",
    "TickRule",
    "check_cron",
    "check_timezone",
    "jitter_for",
    "tick_text",
]

#: The ``@`` shorthands accepted for ``cron`` and the five-field expressions they stand for.
CRON_ALIASES: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

#: The longest cron expression accepted, in characters.
MAX_CRON_LENGTH = 200

#: The latest time a tick may fall on (the year 9000: far from ``datetime``'s limit).
_LATEST = datetime(9000, 1, 1, tzinfo=UTC).timestamp()


def check_timezone(value: object) -> ZoneInfo:
    """The IANA time zone named ``value``.

    Raises:
        ScheduleValueError: ``value`` is not a string naming a time zone the system (or the
            ``tzdata`` package) knows; ``field`` is ``"timezone"``.
    """
    if not isinstance(value, str) or not value.strip():
        raise ScheduleValueError(
            f"timezone must be an IANA time zone name such as 'Europe/Paris', got {value!r}",
            field="timezone",
        )
    try:
        return ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ScheduleValueError(
            f"timezone {value!r} is not a known IANA time zone name", field="timezone"
        ) from exc


def check_cron(value: object) -> str:
    """The cron expression ``value``, with an ``@`` shorthand expanded (:data:`CRON_ALIASES`).

    Five fields (minute, hour, day of month, month, day of week) or six (seconds first), in
    the syntax of ``cronsim``: ``*``, ranges, lists, steps, month and day names, ``L``,
    ``LW``, ``#``.

    Returns:
        The expression to iterate.

    Raises:
        ScheduleValueError: not a string, or not an expression ``cronsim`` accepts (the
            message says which part); ``field`` is ``"cron"``.
    """
    if not isinstance(value, str) or not value.strip():
        raise ScheduleValueError(
            f"cron must be a cron expression such as '0 2 * * *', got {value!r}", field="cron"
        )
    if len(value) > MAX_CRON_LENGTH:
        raise ScheduleValueError(
            f"cron is {len(value)} characters long; at most {MAX_CRON_LENGTH} allowed",
            field="cron",
        )
    expression = CRON_ALIASES.get(value.strip().lower(), value.strip())
    try:
        CronSim(expression, datetime(2000, 1, 1, tzinfo=UTC))
    except (CronSimError, ValueError, IndexError) as exc:
        detail = str(exc) or type(exc).__name__
        raise ScheduleValueError(
            f"cron {value!r} is not a valid cron expression: {detail}", field="cron"
        ) from exc
    return expression


def tick_text(tick: float) -> str:
    """A tick as ISO 8601 UTC text: ``2030-01-01T02:00:00Z`` (microseconds when it has
    any). The text names the tick in idempotency keys, logs and views."""
    moment = datetime.fromtimestamp(tick, tz=UTC)
    spec = "microseconds" if moment.microsecond else "seconds"
    return moment.isoformat(timespec=spec).replace("+00:00", "Z")


def jitter_for(name: str, tick: float, jitter: float) -> float:
    """The delay, in seconds in ``[0, jitter)``, of tick ``tick`` of schedule ``name``: a
    hash of the two, so every scheduler computes the same delay (docs/schedules.md,
    "Jitter")."""
    if jitter <= 0:
        return 0.0
    digest = hashlib.sha256(f"{name}\x00{tick_text(tick)}".encode()).digest()
    return jitter * (int.from_bytes(digest[:8], "big") / 2.0**64)


@dataclass(frozen=True, slots=True)
class TickRule:
    """The ticks of one schedule: a cron expression in a time zone, or a period.

    Attributes:
        cron: the expression (aliases expanded), or ``None``.
        every: the period in whole seconds, or ``None``.
        timezone: the IANA name the cron expression is read in.
    """

    cron: str | None
    every: int | None
    timezone: str = "UTC"

    def after(self, moment: float) -> float | None:
        """The first tick strictly after ``moment`` (epoch seconds); ``None`` when there is
        none before the year 9000 (``0 0 30 2 *``)."""
        if self.every is not None:
            tick = float((math.floor(moment / self.every) + 1) * self.every)
            return tick if tick < _LATEST else None
        assert self.cron is not None
        zone = ZoneInfo(self.timezone)
        start = datetime.fromtimestamp(moment, tz=UTC).astimezone(zone)
        try:
            for found in CronSim(self.cron, start):
                tick = found.timestamp()
                if tick >= _LATEST:
                    return None
                if tick > moment:
                    return tick
        except (StopIteration, OverflowError, ValueError):
            return None
        return None  # pragma: no cover - CronSim iterates until it raises

    def at_or_before(self, moment: float) -> float | None:
        """The last tick at or before ``moment`` (epoch seconds); ``None`` when none in the
        fifty years before it."""
        if self.every is not None:
            return float(math.floor(moment / self.every) * self.every)
        assert self.cron is not None
        zone = ZoneInfo(self.timezone)
        # cronsim drops microseconds on its first reverse step: start a second later, so a
        # tick exactly at ``moment`` is found too.
        start = datetime.fromtimestamp(math.floor(moment) + 1, tz=UTC).astimezone(zone)
        try:
            for found in CronSim(self.cron, start, reverse=True):
                tick = found.timestamp()
                if tick <= moment:
                    return tick
        except (StopIteration, OverflowError, ValueError):
            return None
        return None  # pragma: no cover - CronSim iterates until it raises

    def before(self, tick: float) -> float | None:
        """The last tick strictly before ``tick``."""
        if self.every is not None:
            return float((math.ceil(tick / self.every) - 1) * self.every)
        return self.at_or_before(math.ceil(tick) - 1)  # cron ticks are whole seconds

    def describe(self) -> str:
        """The rule as one line: ``cron '0 2 * * *' (Europe/Paris)`` or ``every 60 s``."""
        if self.every is not None:
            return f"every {self.every} s"
        return f"cron {self.cron!r} ({self.timezone})"

    @staticmethod
    def period(every: object) -> int:
        """A period in whole seconds from ``every``: a positive ``timedelta`` or number.

        Raises:
            ScheduleValueError: not a whole number of seconds of at least 1 (``0``, ``-5``,
                ``1.5``, ``nan``, ``True``, ``"60"``); ``field`` is ``"every"``.
        """
        if isinstance(every, timedelta):
            seconds: float = every.total_seconds()
        elif isinstance(every, int | float) and not isinstance(every, bool):
            seconds = float(every)
        else:
            raise ScheduleValueError(
                f"every must be a timedelta or a number of seconds, got {every!r}",
                field="every",
            )
        if not math.isfinite(seconds) or seconds < 1 or seconds != math.floor(seconds):
            raise ScheduleValueError(
                f"every must be a whole number of seconds of at least 1, got {every!r}",
                field="every",
            )
        if seconds > 366 * 86400:
            raise ScheduleValueError(
                f"every must be at most 366 days, got {every!r} (use cron for longer periods)",
                field="every",
            )
        return int(seconds)

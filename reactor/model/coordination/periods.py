"""Once-per-calendar-bucket markers (mark-if-absent) and the bucket helpers, as pure functions.

Semantics: docs/protocol.md#periods. Marking is
**first-wins** on every backend (Ruby's Redis adapter did a plain ``SET``, so the last marker
won there; its SQL adapter kept the first).

* :func:`mark` — creates the marker if absent and returns ``True``; a live marker is kept
  untouched and the call returns ``False``. A TTL of ``None`` keeps the marker forever.
* :func:`bucket` — the UTC, calendar-aligned bucket id of ``now`` for an ``every`` of
  ``minute`` (``YYYY-MM-DDTHH-MM``), ``hour`` (``YYYY-MM-DDTHH``), ``day`` (``YYYY-MM-DD``),
  ``week`` (ISO ``GGGG-Www``), ``month`` (``YYYY-MM``), ``year`` (``YYYY``) or an integer
  number of seconds ``N`` (``i<epoch div N>``).
* :func:`period_seconds` — the bucket length; a month counts as 31 days and a year as 366.
* :func:`ttl_seconds` — ``2 x period_seconds``, the marker TTL the Ruby client uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

from reactor.model.coordination._expiry import deadline, is_live
from reactor.model.records import PeriodMarker

__all__ = [
    "CALENDAR_PERIODS",
    "Every",
    "PeriodMarkState",
    "bucket",
    "bucket_key",
    "expiry",
    "live",
    "mark",
    "marker",
    "period_seconds",
    "ttl_seconds",
]

#: A period: a calendar unit name or a positive whole number of seconds.
Every = str | int

_DAY = 86_400

#: The calendar units :func:`bucket` accepts, with their lengths in seconds.
CALENDAR_PERIODS: dict[str, int] = {
    "minute": 60,
    "hour": 3_600,
    "day": _DAY,
    "week": 7 * _DAY,
    "month": 31 * _DAY,
    "year": 366 * _DAY,
}


@dataclass(frozen=True, slots=True)
class PeriodMarkState:
    """One period marker.

    Attributes:
        context_id: the run that claimed the bucket, when given.
        marked_at: epoch seconds of the claim.
        expires_at: epoch seconds when the marker lapses, ``None`` for never.
    """

    context_id: str | None
    marked_at: float
    expires_at: float | None


def live(state: PeriodMarkState | None, now: float) -> PeriodMarkState | None:
    """The marker if it exists at ``now``, else ``None``."""
    if state is None or not is_live(state.expires_at, now):
        return None
    return state


def expiry(state: PeriodMarkState) -> float | None:
    """The instant after which the marker is garbage."""
    return state.expires_at


def mark(
    state: PeriodMarkState | None, now: float, ttl: float | None, context_id: str | None = None
) -> tuple[PeriodMarkState | None, bool]:
    """Mark the (already bucketed) key if absent; the first mark wins.

    Args:
        state: the current marker.
        now: the current time in epoch seconds.
        ttl: seconds the marker lives, ``None`` for forever.
        context_id: the claiming run, if any.

    Returns:
        ``(new_state, True)`` when this call created the marker, ``(state, False)`` when a live
        marker already existed (it is not changed).

    Raises:
        ValueError: ``ttl`` is neither ``None`` nor a positive finite number.
    """
    expires_at = deadline(now, ttl)
    if live(state, now) is not None:
        return state, False
    return PeriodMarkState(context_id=context_id, marked_at=now, expires_at=expires_at), True


def marker(state: PeriodMarkState | None, now: float) -> PeriodMarker | None:
    """The marker at ``now`` (``period_marker_info``), or ``None`` when unmarked or expired."""
    current = live(state, now)
    if current is None:
        return None
    return PeriodMarker(context_id=current.context_id, marked_at=current.marked_at)


def _seconds(every: Every) -> int:
    if isinstance(every, bool):
        raise ValueError(f"unknown period {every!r}")
    if isinstance(every, int):
        if every <= 0:
            raise ValueError(f"a period in seconds must be > 0, got {every!r}")
        return every
    if every in CALENDAR_PERIODS:
        return CALENDAR_PERIODS[every]
    raise ValueError(
        f"unknown period {every!r}; use one of {sorted(CALENDAR_PERIODS)} or whole seconds"
    )


def period_seconds(every: Every) -> int:
    """The length of a bucket in seconds (``Period.period_seconds``).

    Args:
        every: ``"minute"``, ``"hour"``, ``"day"``, ``"week"``, ``"month"`` (31 days),
            ``"year"`` (366 days) or a positive ``int`` of seconds.

    Raises:
        ValueError: ``every`` is not one of those.
    """
    return _seconds(every)


def ttl_seconds(every: Every) -> int:
    """The marker TTL for ``every``: ``2 x period_seconds(every)`` (``Period.ttl_seconds``).

    Raises:
        ValueError: ``every`` is not a known period.
    """
    return 2 * _seconds(every)


def bucket(every: Every, now: float) -> str:
    """The UTC calendar bucket id that ``now`` falls in (docs/protocol.md#periods).

    Args:
        every: a calendar unit name or a positive ``int`` of seconds.
        now: epoch seconds.

    Returns:
        e.g. ``"2024-03-05T14-07"`` (minute), ``"2024-03-05T14"`` (hour), ``"2024-03-05"``
        (day), ``"2024-W10"`` (ISO week), ``"2024-03"`` (month), ``"2024"`` (year),
        ``"i28463"`` (``every=60000``: ``floor(now) div N``).

    Raises:
        ValueError: ``every`` is not a known period.
    """
    seconds = _seconds(every)
    if isinstance(every, int):
        return f"i{math.floor(now) // seconds}"
    at = datetime.fromtimestamp(math.floor(now), tz=UTC)
    if every == "minute":
        return f"{at.year:04d}-{at.month:02d}-{at.day:02d}T{at.hour:02d}-{at.minute:02d}"
    if every == "hour":
        return f"{at.year:04d}-{at.month:02d}-{at.day:02d}T{at.hour:02d}"
    if every == "day":
        return f"{at.year:04d}-{at.month:02d}-{at.day:02d}"
    if every == "week":
        iso = at.isocalendar()
        return f"{iso.year:04d}-W{iso.week:02d}"
    if every == "month":
        return f"{at.year:04d}-{at.month:02d}"
    return f"{at.year:04d}"


def bucket_key(base: str, every: Every, now: float) -> str:
    """The bucketed key a caller passes to ``PeriodStore.mark``: ``"<base>:<bucket>"``.

    Raises:
        ValueError: ``every`` is not a known period.
    """
    return f"{base}:{bucket(every, now)}"

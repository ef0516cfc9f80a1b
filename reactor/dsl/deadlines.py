"""Run deadlines: the values ``deadline=`` accepts on a reactor class and at start
(docs/concepts.md, "Run deadlines").

A reactor class declares a relative deadline (``deadline = 3600`` seconds, or a
``timedelta``), counted from each run's start; a run started with ``deadline=`` overrides it
with seconds, a ``timedelta`` or a timezone-aware ``datetime``. Either way the run stores one
absolute deadline, in epoch seconds on the runtime clock.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from reactor.errors import DeadlineError, DefinitionError

__all__ = ["MAX_SECONDS", "absolute_deadline", "declared_seconds"]

#: The longest deadline, in seconds from the start (3,650 days: about ten years).
MAX_SECONDS = 3650 * 24 * 3600.0


def _shown(value: Any) -> str:
    """``repr(value)`` for a message, cut short (a hostile ``__repr__`` may raise)."""
    try:
        text = repr(value)
    except Exception:  # only for a message
        return f"<{type(value).__name__}>"
    return text if len(text) <= 60 else f"{text[:57]}..."


def _relative(value: Any) -> float | str:
    """``value`` (seconds or a ``timedelta``) as seconds, or the reason it is no deadline."""
    if isinstance(value, timedelta):
        # the type's own conversion, as for numbers: a subclass's total_seconds() could
        # return anything (a str, a huge int) or lie about a far deadline
        seconds = timedelta.total_seconds(value)
    elif isinstance(value, bool) or not isinstance(value, int | float):
        return ("must be a number of seconds (an int or a float), a timedelta or a "
                "timezone-aware datetime")
    else:
        try:  # the type's own conversion: a subclass cannot slip a bad value through
            seconds = int.__float__(value) if isinstance(value, int) else float.__float__(value)
        except OverflowError:
            seconds = math.inf
    if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_SECONDS:
        return f"must be finite, above 0 and at most {MAX_SECONDS:,.0f} seconds (3,650 days)"
    return seconds


def _instant(value: datetime) -> float:
    """An aware ``datetime``'s epoch seconds, read with the type's own conversion (a
    subclass's ``timestamp()`` could return NaN or lie); a naive one, or one whose time zone
    fails or gives no usable offset, is a :class:`DeadlineError`."""
    try:
        offset = datetime.utcoffset(value)
        at = None if offset is None else datetime.timestamp(value)
    except Exception as exc:  # the tzinfo's own code, or an offset datetime refuses
        raise DeadlineError(
            f"deadline {_shown(value)} has no usable time zone offset: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if at is None:
        raise DeadlineError(
            f"deadline must be a timezone-aware datetime (a naive one is ambiguous), got "
            f"{_shown(value)}"
        )
    if not math.isfinite(at):  # pragma: no cover - datetime.timestamp is always finite
        raise DeadlineError(f"deadline {_shown(value)} is not a finite time")
    return at


def _iso(at: float) -> str:
    """Epoch seconds ``at`` as an ISO 8601 UTC time, for a message."""
    try:
        return datetime.fromtimestamp(at, tz=UTC).isoformat()
    except (OverflowError, ValueError, OSError):
        return f"{at!r} (epoch seconds)"


def declared_seconds(value: Any, owner: str) -> float | None:
    """Validate a reactor class's ``deadline`` attribute.

    Args:
        value: ``None`` (no deadline), seconds (``int``/``float``) or a ``timedelta``.
        owner: the class's qualified name (for the message).

    Returns:
        The deadline in seconds from each run's start, or ``None``.

    Raises:
        DefinitionError: any other value, or one not finite, not above 0 or beyond
            :data:`MAX_SECONDS`.
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        raise DefinitionError(
            f"{owner}: deadline on a reactor class is relative to each run's start (seconds "
            f"or a timedelta), got the datetime {_shown(value)}; pass a datetime at start: "
            "run(deadline=...)"
        )
    seconds = _relative(value)
    if isinstance(seconds, str):
        raise DefinitionError(f"{owner}: deadline {seconds}, got {_shown(value)}")
    return seconds


def absolute_deadline(value: Any, declared: float | None, now: float) -> float | None:
    """The deadline a new run stores: ``deadline=`` given at start, else the class's.

    Args:
        value: what the caller passed (``None``: the class's ``declared`` applies), seconds
            from now, a ``timedelta`` or a timezone-aware ``datetime``.
        declared: the class's deadline in seconds from the start, or ``None``.
        now: the run's start, epoch seconds on the runtime clock.

    Returns:
        The deadline in epoch seconds, or ``None`` (no deadline).

    Raises:
        DeadlineError: ``value`` is of another type, not finite, not above 0, beyond
            :data:`MAX_SECONDS` from now, a naive ``datetime``, or a ``datetime`` not after
            ``now`` (nothing is stored).
    """
    if value is None:
        return None if declared is None else now + declared
    if isinstance(value, datetime):
        at = _instant(value)
        if at <= now:
            raise DeadlineError(f"deadline {_iso(at)} has already passed")
        if at - now > MAX_SECONDS:
            raise DeadlineError(
                f"deadline {_iso(at)} is more than {MAX_SECONDS:,.0f} seconds away"
            )
        return at
    seconds = _relative(value)
    if isinstance(seconds, str):
        raise DeadlineError(f"deadline {seconds}, got {_shown(value)}")
    return now + seconds

"""``SleepDecl``: when a ``sleep`` step wakes (docs/schedules.md, "Durable sleep").

A sleep is a step with no body: reaching it parks the run, stored ``paused`` with a sleep
marker, until its wake time, without holding a thread, a lock or a slot. It is declared with
:func:`reactor.dsl.declarations.sleep`::

    class Reminder(Reactor):
        email = Input(str)

        welcome = step(SendWelcome, email=input("email"))
        nap = sleep(seconds=2 * 3600, wait_for="welcome")
        remind = step(SendReminder, email=input("email"), wait_for="nap")

The wake time comes from exactly one of ``seconds`` (a delay counted from when the run
reaches the step), ``until`` (a timezone-aware ``datetime``) or ``from_input`` (the name of a
run input holding either, read when the run reaches the step). This module checks the
options when the class is created and computes the wake time (:meth:`SleepDecl.wake_at`);
parking and waking live in :mod:`reactor.engine.sleeps`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reactor.errors import DefinitionError, SleepValueError

__all__ = ["MAX_SLEEP_SECONDS", "SleepDecl"]

#: The longest sleep, in seconds (ten years of 366 days): a wake time further ahead is refused
#: (``DefinitionError`` for ``seconds=``, ``SleepValueError`` when the run reaches the step),
#: so every wake time is a date the views can show (docs/schedules.md, "Durable sleep").
MAX_SLEEP_SECONDS = 10 * 366 * 24 * 3600.0


def _is_seconds(value: Any) -> bool:
    """Whether ``value`` is a positive, finite number of seconds (not a ``bool``)."""
    return (
        isinstance(value, int | float) and not isinstance(value, bool)
        and math.isfinite(value) and value > 0
    )


def _is_aware(value: Any) -> bool:
    """Whether ``value`` is a timezone-aware ``datetime``."""
    return isinstance(value, datetime) and value.utcoffset() is not None


@dataclass(frozen=True, slots=True)
class SleepDecl:
    """The options of one ``sleep`` step: exactly one of them is set.

    Attributes:
        seconds: the delay, positive and finite, counted from when the run reaches the step.
        until: the wake time, a timezone-aware ``datetime``.
        from_input: the name of a run input holding the delay in seconds or the wake time (a
            timezone-aware ``datetime``, or ISO 8601 text with an offset), read when the run
            reaches the step.

    Raises:
        DefinitionError: none or more than one option is given, ``seconds`` is not a
            positive finite number, ``until`` is not a timezone-aware ``datetime``, or
            ``from_input`` is not a non-blank string (the message names the field).
    """

    seconds: float | None = None
    until: datetime | None = None
    from_input: str | None = None

    def __post_init__(self) -> None:
        given = [n for n in ("seconds", "until", "from_input") if getattr(self, n) is not None]
        if len(given) != 1:
            raise DefinitionError(
                "sleep() needs exactly one of seconds=, until= and from_input=, got "
                f"{given or 'none'}"
            )
        if self.seconds is not None:
            if not _is_seconds(self.seconds) or self.seconds > MAX_SLEEP_SECONDS:
                raise DefinitionError(
                    "sleep(seconds=...) must be a positive, finite number of seconds of at "
                    f"most {MAX_SLEEP_SECONDS:.0f} (ten years), got {self.seconds!r}"
                )
            object.__setattr__(self, "seconds", float(self.seconds))
        if self.until is not None and not _is_aware(self.until):
            raise DefinitionError(
                "sleep(until=...) must be a timezone-aware datetime, got "
                f"{self.until!r}"
            )
        name = self.from_input
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise DefinitionError(
                f"sleep(from_input=...) must be an input's name, got {name!r}"
            )

    def wake_at(self, now: float, inputs: dict[str, Any]) -> float:
        """The wake time of a run reaching the step at ``now``.

        Args:
            now: epoch seconds on the runtime clock (docs/testing.md, "The clock").
            inputs: the run's inputs (read for ``from_input``).

        Returns:
            Epoch seconds; it may be in the past (the step then completes at once).

        Raises:
            SleepValueError: the input named by ``from_input`` is missing, or holds neither a
                positive finite number of seconds nor a timezone-aware datetime (or ISO 8601
                text with an offset); or the wake time is more than
                :data:`MAX_SLEEP_SECONDS` ahead (``until`` too); the message and ``field``
                name the input (``"until"``).
        """
        if self.seconds is not None:
            return now + self.seconds
        if self.until is not None:
            return _bounded(self.until.timestamp(), now, "until", "sleep(until=...)")
        name = self.from_input
        assert name is not None  # exactly one option is set
        if name not in inputs:
            raise SleepValueError(f"sleep(from_input={name!r}): the run has no input {name!r}",
                                  field=name)
        value = inputs[name]
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                raise SleepValueError(
                    f"sleep(from_input={name!r}): input {name!r} is text but not an ISO 8601 "
                    "date and time", field=name,
                ) from None
        where = f"sleep(from_input={name!r}): input {name!r}"
        if _is_seconds(value):
            return _bounded(now + float(value), now, name, where)
        if _is_aware(value):
            return _bounded(float(value.timestamp()), now, name, where)
        raise SleepValueError(
            f"sleep(from_input={name!r}): input {name!r} must be a positive, finite number of "
            f"seconds or a timezone-aware datetime, got {type(value).__name__}"
            + (" without a timezone" if isinstance(value, datetime) else ""),
            field=name,
        )


def _bounded(wake_at: float, now: float, field: str, what: str) -> float:
    """``wake_at``, refused when it is more than :data:`MAX_SLEEP_SECONDS` after ``now``.

    Raises:
        SleepValueError: naming ``field``.
    """
    if wake_at - now > MAX_SLEEP_SECONDS:
        raise SleepValueError(
            f"{what} wakes more than {MAX_SLEEP_SECONDS:.0f} seconds (ten years) from now",
            field=field,
        )
    return wake_at

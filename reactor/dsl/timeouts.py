"""The ``Timeouts`` declaration: how long a step's attempts may run (docs/concepts.md, "Time
limits").

``per_attempt`` bounds each attempt of the body; ``total`` bounds the step's bodies and retry
waits together, on the runtime clock (across the executions of a run a worker re-enqueued for
a retry). An attempt past its limit fails with
:class:`~reactor.errors.StepTimeout`, which the step's retry policy retries like any failure
(a timeout of ``total`` is not retried: no time is left).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from reactor.errors import DefinitionError

__all__ = ["MAX_SECONDS", "Timeouts"]


#: The longest limit a ``Timeouts`` field may declare, in seconds (30 days): every platform's
#: thread waits accept it (``threading.TIMEOUT_MAX`` is about 49.7 days on Windows).
MAX_SECONDS = 30 * 24 * 3600.0


def _shown(value: Any) -> str:
    """``repr(value)`` for an error message, cut short (a huge int has thousands of digits,
    and a hostile ``__repr__`` may raise)."""
    try:
        text = repr(value)
    except Exception:  # only for a message: a failing __repr__ is not the point
        return f"<{type(value).__name__}>"
    return text if len(text) <= 60 else f"{text[:57]}..."


def _seconds(field: str, value: Any) -> float | None:
    """``value`` as positive, finite seconds (at most :data:`MAX_SECONDS`), or ``None`` when
    not set.

    The value is converted with ``int``'s or ``float``'s own conversion before it is checked,
    so a subclass overriding ``__float__`` or the comparisons cannot slip a bad limit through.

    Raises:
        DefinitionError: ``value`` is not an ``int`` or ``float`` (a bool is not one), not
            finite, not above 0, or above :data:`MAX_SECONDS`.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DefinitionError(
            f"Timeouts.{field} must be a number of seconds (an int or a float), got "
            f"{_shown(value)}"
        )
    try:
        seconds = int.__float__(value) if isinstance(value, int) else float.__float__(value)
    except OverflowError:  # an int beyond any float
        seconds = math.inf
    if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_SECONDS:
        raise DefinitionError(
            f"Timeouts.{field} must be a finite number of seconds above 0 and at most "
            f"{MAX_SECONDS:,.0f} (30 days), got {_shown(value)}"
        )
    return seconds


@dataclass(frozen=True)
class Timeouts:
    """Time limits of a step (docs/concepts.md, "Time limits").

    Args:
        per_attempt: seconds each attempt of the body may run; ``None``: no limit.
        total: seconds the step's bodies and retry waits may take together (on the runtime
            clock, across a worker's re-enqueued retries); ``None``: no limit.
        heartbeat: seconds an attempt's body may go without calling ``ctx.heartbeat``
            (from its start, then from its last call); ``None``: no limit (docs/concepts.md,
            "Heartbeats").

    Raises:
        DefinitionError: a limit is not an int or float of seconds above 0 and at most
            :data:`MAX_SECONDS`, or none is set.
    """

    per_attempt: float | None = None
    total: float | None = None
    heartbeat: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "per_attempt", _seconds("per_attempt", self.per_attempt))
        object.__setattr__(self, "total", _seconds("total", self.total))
        object.__setattr__(self, "heartbeat", _seconds("heartbeat", self.heartbeat))
        if self.per_attempt is None and self.total is None and self.heartbeat is None:
            raise DefinitionError(
                "Timeouts() sets no limit: give per_attempt=, total= and/or heartbeat= "
                "(seconds)"
            )

    def limit(self, elapsed: float) -> tuple[float | None, str]:
        """The seconds the next attempt may run, and which limit that is.

        Args:
            elapsed: seconds of ``total`` used so far (the step's bodies and retry waits).

        Returns:
            ``(seconds, "per_attempt" | "total")``: the tighter limit (at least 0), or
            ``(None, "")`` when neither applies.
        """
        left = None if self.total is None else max(self.total - elapsed, 0.0)
        if self.per_attempt is None and left is None:
            return None, ""
        if left is None or (self.per_attempt is not None and self.per_attempt <= left):
            return self.per_attempt, "per_attempt"
        return left, "total"

"""The ``Timeouts`` declaration: how long a step's attempts may run (docs/concepts.md, "Time
limits").

``per_attempt`` bounds each attempt of the body; ``total`` bounds every attempt and retry wait
of the step together, from the start of its first attempt. An attempt past its limit fails
with :class:`~reactor.errors.StepTimeout`, which the step's retry policy retries like any
failure (a timeout of ``total`` is not retried: no time is left).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from reactor.errors import DefinitionError

__all__ = ["Timeouts"]


def _seconds(field: str, value: Any) -> float | None:
    """``value`` as positive, finite seconds, or ``None`` when not set.

    Raises:
        DefinitionError: ``value`` is not a number (a bool is not one), not finite, or not
            above 0.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DefinitionError(
            f"Timeouts.{field} must be a number of seconds, got {value!r}"
        )
    if not math.isfinite(value) or value <= 0:
        raise DefinitionError(
            f"Timeouts.{field} must be a finite number of seconds above 0, got {value!r}"
        )
    return float(value)


@dataclass(frozen=True)
class Timeouts:
    """Time limits of a step (docs/concepts.md, "Time limits").

    Args:
        per_attempt: seconds each attempt of the body may run; ``None``: no limit.
        total: seconds every attempt and retry wait of the step may take together, from the
            start of its first attempt; ``None``: no limit.

    Raises:
        DefinitionError: a limit is not a finite number of seconds above 0, or neither is
            set.
    """

    per_attempt: float | None = None
    total: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "per_attempt", _seconds("per_attempt", self.per_attempt))
        object.__setattr__(self, "total", _seconds("total", self.total))
        if self.per_attempt is None and self.total is None:
            raise DefinitionError(
                "Timeouts() sets no limit: give per_attempt= and/or total= (seconds)"
            )

    def limit(self, elapsed: float) -> tuple[float | None, str]:
        """The seconds the next attempt may run, and which limit that is.

        Args:
            elapsed: seconds since the step's first attempt started (its attempts and retry
                waits).

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

"""The ``Retries`` declaration: how often a failing step is attempted and how long to wait.

docs/concepts.md, "Retries": a step without ``retries`` runs once; ``max_attempts``
counts the first attempt; the delay after failed attempt ``n`` (1-based) is
``base_delay * 2**(n-1)`` (exponential), ``base_delay * n`` (linear) or ``base_delay`` (fixed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from reactor.errors import DefinitionError

__all__ = ["NO_RETRIES", "Backoff", "Retries"]

Backoff = Literal["exponential", "linear", "fixed"]


@dataclass(frozen=True)
class Retries:
    """Retry policy of a step.

    Args:
        max_attempts: total attempts including the first (``>= 1``).
        backoff: ``"exponential"`` (default), ``"linear"`` or ``"fixed"``.
        base_delay: seconds (``>= 0``).

    Raises:
        DefinitionError: an argument is out of range.
    """

    max_attempts: int = 1
    backoff: Backoff = "exponential"
    base_delay: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise DefinitionError(f"Retries.max_attempts must be an int, got {self.max_attempts!r}")
        if self.max_attempts < 1:
            raise DefinitionError(
                f"Retries.max_attempts must be at least 1, got {self.max_attempts!r}"
            )
        if self.backoff not in ("exponential", "linear", "fixed"):
            raise DefinitionError(
                f"Retries.backoff must be 'exponential', 'linear' or 'fixed', got {self.backoff!r}"
            )
        if self.base_delay < 0:
            raise DefinitionError(
                f"Retries.base_delay must be >= 0 seconds, got {self.base_delay!r}"
            )

    def delay(self, failed_attempt: int) -> float:
        """Seconds to wait after failed attempt ``failed_attempt`` (1-based) before the next.

        Args:
            failed_attempt: the attempt that just failed (1 for the first attempt).

        Returns:
            The delay in seconds.
        """
        n = max(1, failed_attempt)
        if self.backoff == "exponential":
            return float(self.base_delay * 2 ** (n - 1))
        if self.backoff == "linear":
            return float(self.base_delay * n)
        return float(self.base_delay)


#: The default policy: a single attempt.
NO_RETRIES = Retries(max_attempts=1, base_delay=0.0)

"""Parks: how an execution inside a worker gives its thread back instead of blocking.

Contention parks, it does not fail: in a worker, contention (a held lock or semaphore, a full rate
limit, an ordered-lock wait) and waiting for an async unit **park**: the execution saves its context
(holds detached, not released), raises :class:`Park`, and the job handler re-enqueues the job with
``delay`` seconds. Parks never consume retry attempts; capped parks are bounded by
``lock_snooze_max_attempts`` (ordered-lock waits, liveness-lock contention and async waits are
uncapped). Synchronous callers never park: they wait up to the primitive's ``wait`` and fail.

Mirrors ruby_reactor's ``ExecutionParked`` family and the Worker's ``handle_snooze``
(docs/coordination.md, "Contention").
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from reactor.config import Settings
from reactor.errors import SnoozeLimitError
from reactor.model.results import Failure
from reactor.model.status import RunStatus

if TYPE_CHECKING:
    from reactor.model.context import Context

#: This module's own random stream for jitter: library code never draws from the global
#: ``random`` state (a user's seeded stream, property-based tests replaying theirs).
_RANDOM = random.Random()

__all__ = ["Park", "ParkReason", "park_delay", "snooze_limit_failure"]

ParkReason = Literal["lock", "semaphore", "rate_limit", "ordered_lock", "liveness", "async_wait"]

#: Reasons whose parks count toward ``lock_snooze_max_attempts``.
CAPPED_REASONS: frozenset[str] = frozenset({"lock", "semaphore", "rate_limit"})


@dataclass
class Park(BaseException):
    """Raised inside an execution running in a worker to re-enqueue it after ``delay`` seconds.

    A ``BaseException`` so user ``except Exception`` blocks cannot swallow it.

    Attributes:
        delay: seconds until the job should run again.
        reason: what the execution waits for (see :data:`ParkReason`).
        key: the coordination key or unit it waits on (for logs and dashboards).
        step: the step that parked, ``None`` at reactor level.
    """

    delay: float
    reason: ParkReason
    key: str | None = None
    step: str | None = None

    def __post_init__(self) -> None:
        super().__init__(f"parked on {self.reason} {self.key or ''} for {self.delay:.2f}s")

    @property
    def capped(self) -> bool:
        """Whether this park counts toward ``lock_snooze_max_attempts``."""
        return self.reason in CAPPED_REASONS


def park_delay(
    settings: Settings,
    retry_after: float | None = None,
    *,
    rand: Callable[[float, float], float] = _RANDOM.uniform,
) -> float:
    """The delay of a park: ``lock_snooze_base_delay + uniform(0, jitter)``.

    Args:
        settings: the engine settings.
        retry_after: an exact wait known from the primitive (a rate limit's window roll-over or
            an ordered lock's ``retry_after``), used instead of the base delay, floored at 0.1 s.
        rand: the random source (injectable for tests).

    Returns:
        Seconds to wait before the job runs again.
    """
    if retry_after is not None:
        return max(retry_after, 0.1)
    return settings.lock_snooze_base_delay + rand(0.0, settings.lock_snooze_jitter)


def snooze_limit_failure(
    park: Park, attempts: int, settings: Settings, ctx: Context, *, admitted: bool
) -> Failure | None:
    """Give up on a unit that parks again at the snooze cap without ever being admitted
    (docs/coordination.md, "Contention"; docs/workers.md, "Decisions", "Snooze counting").

    A capped park (:attr:`Park.capped`) of a unit that already parked ``attempts`` times,
    ``attempts >= lock_snooze_max_attempts``, of a unit never admitted (nothing ran: no
    rollback needed) ends it: ``ctx`` is marked ``failed`` with a non-retryable
    ``Failure(SnoozeLimitError)`` and no current step; the caller saves it. An admitted unit,
    an uncapped park or ``lock_snooze_max_attempts=None`` keeps waiting.

    Args:
        park: the park just raised.
        attempts: the unit's capped parks before this one (a job payload's count).
        settings: the engine settings (``lock_snooze_max_attempts``).
        ctx: the unit's context (changed only when it gives up).
        admitted: whether the unit passed its reactor-level gates or made progress.

    Returns:
        The ``Failure`` now on ``ctx``, or ``None`` when the unit parks again.
    """
    limit = settings.lock_snooze_max_attempts
    if not park.capped or limit is None or attempts < limit or admitted:
        return None
    error = SnoozeLimitError(
        f"gave up after {attempts} parks waiting for {park.reason} {park.key or ''}".strip(),
        reason=park.reason, key=park.key, attempts=attempts,
    )
    failure = Failure(error, retryable=False, reactor_name=ctx.reactor)
    ctx.failure, ctx.status, ctx.current_step = failure, RunStatus.FAILED, None
    return failure

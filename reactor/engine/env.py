"""``Env``: what one execution needs from the process — the runtime, its clock, the retry wait.

The engine reaches storage and settings only through :func:`reactor.config.current` (or an
explicitly passed :class:`~reactor.config.Runtime`) and the :mod:`reactor.ports` protocols;
it never imports an adapter (docs/architecture.md, "Layers"). It waits and measures intervals
only through the runtime's :class:`~reactor.ports.Clock` (docs/testing.md, "The clock").
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from reactor import config
from reactor.config import Runtime, Settings
from reactor.ports.clock import Clock, SystemClock
from reactor.ports.storage import Storage, Subscription

__all__ = ["Env", "make_env", "wait_for_signal"]


@dataclass(frozen=True)
class Env:
    """The runtime and hooks of one execution (shared by composed children and map elements).

    Attributes:
        runtime: the storage, router, settings and clock in use.
        sleep: the function retry waits go through (seconds): the run's own ``sleep=``
            (``Reactor.execute(inputs, sleep=fn)``), else the runtime clock's
            :meth:`~reactor.ports.Clock.sleep`.
        in_worker: ``True`` when the execution runs inside a worker job: coordination
            contention then raises :class:`reactor.engine.parks.Park` instead of waiting.
        unit_lease: in a worker, ``seconds -> a context manager`` that holds the job's
            delivery with leases of at most ``seconds`` in its scope (a heartbeat step's
            attempt: docs/concepts.md, "Heartbeats"); ``None``: no delivery to shorten.
    """

    runtime: Runtime
    sleep: Callable[[float], None]
    in_worker: bool = False
    unit_lease: Callable[[float], AbstractContextManager[None]] | None = None

    @property
    def storage(self) -> Storage:
        """The configured storage."""
        return self.runtime.storage

    @property
    def settings(self) -> Settings:
        """The engine settings."""
        return self.runtime.settings

    @property
    def clock(self) -> Clock:
        """The runtime's clock: coordination waits, reader waits and their deadlines."""
        return self.runtime.clock

    def now(self) -> float:
        """Epoch seconds on the storage clock."""
        return self.runtime.storage.now()


def make_env(
    runtime: Runtime | None = None, sleep: Callable[[float], None] | None = None
) -> Env:
    """Build an :class:`Env`.

    Args:
        runtime: the runtime; default :func:`reactor.config.current`.
        sleep: the retry wait of this execution (seconds); default the runtime clock's
            :meth:`~reactor.ports.Clock.sleep`.

    Returns:
        The environment.
    """
    runtime = runtime or config.current()
    return Env(runtime=runtime, sleep=sleep or runtime.clock.sleep)


def wait_for_signal(clock: Clock, subscription: Subscription | None, seconds: float) -> None:
    """Wait up to ``seconds`` between two re-checks of a stored record.

    A signal wait (``subscription.get``) blocks in real time, so it is used only on the
    system clock (:class:`~reactor.ports.SystemClock`), where it wakes the waiter as soon as
    the record is published. On any other clock (a test's) the wait goes through
    ``clock.sleep``, so a fake clock moves instead of the thread blocking
    (docs/testing.md, "The clock").

    Args:
        clock: the clock the caller's deadline is measured on.
        subscription: the channel of the awaited record, or ``None`` (no signals).
        seconds: the longest wait.
    """
    if subscription is not None and isinstance(clock, SystemClock):
        subscription.get(seconds)
    else:
        clock.sleep(seconds)

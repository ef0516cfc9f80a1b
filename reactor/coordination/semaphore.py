"""The semaphore client: one lease per holder, auto-extended (``docs/coordination.md``).

A dead holder stops extending and its lease lapses, so capacity is never leaked (the fix for the
slot leaks reported against Prefect, Kestra and Redisson token lists). A live holder's lease is
renewed every ``lease/3`` under the shared renewal policy; when it is lost anyway (an extend
answered ``False``, or the deadline passed without a successful extend) :attr:`Semaphore.lost`
says so ("Renewal and loss"). Waiters back off exponentially with jitter.
"""

from __future__ import annotations

import logging
import math
import random
import uuid
from collections.abc import Callable
from types import TracebackType

from reactor.coordination.heartbeat import Heartbeat
from reactor.errors import LockLost, SemaphoreAcquisitionError
from reactor.model.coordination.renewal import (
    holder_lease,
    poll_delay,
    renew_interval,
    validate_lease,
)
from reactor.ports.clock import Clock, monotonic_reader, sleeper
from reactor.ports.storage import SemaphoreStore

#: This module's own random stream for jitter: library code never draws from the global
#: ``random`` state (a user's seeded stream, property-based tests replaying theirs).
_RANDOM = random.Random()

__all__ = ["Semaphore"]

log = logging.getLogger("reactor.coordination")


class Semaphore:
    """A handle on one counting semaphore for one holder.

    Args:
        store: the semaphore sub-store.
        key: the semaphore key.
        limit: the maximum number of concurrent holders (>= 1).
        holder: the holder token; a fresh UUID when omitted (a parked unit passes its saved
            token to re-adopt its slot).
        lease: seconds a slot stays leased without an extend (default 60; with
            ``auto_extend`` at least :data:`~reactor.model.coordination.renewal.MIN_LEASE`).
        wait: seconds :meth:`acquire` keeps trying when full (0 = a single try), backing off
            exponentially with jitter.
        auto_extend: extend the lease every ``lease/3`` seconds from the shared scheduler.
        on_lost: called (from a scheduler thread) with a :class:`LockLost` when the lease is
            lost while held.
        sleep: the wait between two tries of :meth:`acquire` (seconds); default ``clock``'s
            ``sleep``.
        monotonic: the clock of the holder's deadline, which the renewal keeps in real time;
            default the system's monotonic clock, read at call time. Without ``clock`` it is
            also the clock of the ``wait`` bound.
        clock: the :class:`~reactor.ports.Clock` :meth:`acquire` waits on (its pauses and its
            ``wait`` bound); default the system clock. The engine passes the runtime's
            (docs/testing.md, "The clock").
        skew: the storage's clock-skew budget in seconds (``Capabilities.clock_skew``); the
            holder's deadline is ``holder_lease(lease, skew)`` after an acquire or extend
            started.

    Raises:
        ValueError: ``limit`` < 1, ``lease`` not positive (or below the minimum with
            ``auto_extend``, or not above ``skew``), or ``wait`` negative.
    """

    def __init__(
        self,
        store: SemaphoreStore,
        key: str,
        *,
        limit: int,
        holder: str | None = None,
        lease: float = 60.0,
        wait: float = 0.0,
        auto_extend: bool = True,
        on_lost: Callable[[LockLost], None] | None = None,
        sleep: Callable[[float], None] | None = None,
        monotonic: Callable[[], float] | None = None,
        skew: float = 0.0,
        clock: Clock | None = None,
    ) -> None:
        if limit < 1:
            raise ValueError(f"Semaphore limit must be >= 1, got {limit!r}")
        if isinstance(lease, bool) or not isinstance(lease, int | float) or not (
            lease > 0 and math.isfinite(lease)
        ):
            raise ValueError(
                f"Semaphore lease must be a finite number of seconds > 0, got {lease!r}"
            )
        if auto_extend:
            validate_lease("Semaphore lease (auto-extended)", lease)
        if holder_lease(lease, skew) <= 0:
            raise ValueError(
                f"Semaphore lease ({lease:g}s) must exceed the storage's clock-skew budget "
                f"({skew:g}s)"
            )
        if wait < 0:
            raise ValueError(f"Semaphore wait must be >= 0 seconds, got {wait!r}")
        self.store = store
        self.key = key
        self.limit = limit
        self.holder = holder or str(uuid.uuid4())
        self.lease = lease
        self.wait = wait
        self.auto_extend = auto_extend
        self.on_lost = on_lost
        self.skew = skew
        self._lost: LockLost | None = None
        self._deadline: float | None = None  # the holder's deadline while not auto-extended
        self._sleep = sleep if sleep is not None else sleeper(clock)
        self._monotonic = monotonic_reader(monotonic)
        self._wait_monotonic = clock.monotonic if clock is not None else self._monotonic
        self._heartbeat: Heartbeat | None = None

    @property
    def lost(self) -> LockLost | None:
        """The :class:`LockLost` of a lease that is gone (``None`` while held or never taken).

        Cheap (no I/O): checks the recorded loss and the holder's deadline.
        """
        if self._lost is None:
            heartbeat = self._heartbeat
            expired = (
                heartbeat.expired() if heartbeat is not None
                else self._deadline is not None and self._monotonic() >= self._deadline
            )
            if expired:
                refused = heartbeat is not None and heartbeat.refused
                self._lost = self._loss(
                    "was refused an extend" if refused else "passed without a successful extend"
                )
        return self._lost

    def _loss(self, why: str) -> LockLost:
        return LockLost(
            f"semaphore {self.key!r}: the {self.lease:g}s lease of holder {self.holder} {why}; "
            "another holder may have its slot",
            key=self.key, primitive="semaphore",
        )

    def try_acquire(self) -> bool:
        """Lease a slot once; start the extender on success.

        Raises:
            StorageError: the backend failed.
        """
        started = self._monotonic()
        if self.store.acquire(self.key, self.holder, self.limit, self.lease):
            self._lost = None
            self._deadline = started + holder_lease(self.lease, self.skew)
            self._start_extender(started)
            return True
        return False

    def acquire(self) -> Semaphore:
        """Lease a slot, retrying with a jittered exponential backoff for up to ``wait`` s.

        Raises:
            SemaphoreAcquisitionError: every slot is leased at the deadline.
            StorageError: the backend failed.
        """
        deadline = self._wait_monotonic() + self.wait
        attempt = 0
        while True:
            if self.try_acquire():
                return self
            remaining = deadline - self._wait_monotonic()
            if remaining <= 0:
                raise SemaphoreAcquisitionError(
                    f"semaphore {self.key!r} has all {self.limit} slots leased", key=self.key
                )
            attempt += 1
            self._sleep(poll_delay(attempt, remaining, _RANDOM.uniform(0.5, 1.0)))

    def release(self) -> bool:
        """Stop the extender and give the slot back.

        Returns:
            ``False`` when the lease had lapsed (logged as ``event=release_refused``).

        Raises:
            StorageError: the backend failed.
        """
        self._stop_extender()
        released = self.store.release(self.key, self.holder)
        if not released:
            log.warning("event=release_refused primitive=semaphore key=%s holder=%s",
                        self.key, self.holder)
            if self._lost is None:
                self._lost = self._loss("had lapsed at release")
        self._deadline = None
        return released

    def detach(self) -> None:
        """Stop extending but keep the lease (a park keeps the slot up to the lease)."""
        self._stop_extender()

    def reattach(self) -> bool:
        """Re-adopt a detached lease; ``False`` when it lapsed (acquire afresh).

        Raises:
            StorageError: the backend failed.
        """
        started = self._monotonic()
        if self.store.extend(self.key, self.holder, self.lease):
            self._lost = None
            self._deadline = started + holder_lease(self.lease, self.skew)
            self._start_extender(started)
            return True
        return False

    def _start_extender(self, acquired_at: float) -> None:
        if not self.auto_extend or self._heartbeat is not None:
            return
        lease = holder_lease(self.lease, self.skew)  # docs/coordination.md#clock-skew
        self._heartbeat = Heartbeat(
            f"semaphore-extend:{self.key}",
            renew_interval(lease),
            lambda: self.store.extend(self.key, self.holder, self.lease),
            self._report_lost,
            lease=lease, clock=self._monotonic,
        ).start(acquired_at)

    def _report_lost(self) -> None:
        lost = self.lost
        if lost is None:  # an extend answered False before the deadline
            lost = self._lost = self._loss("was refused an extend")
        if self.on_lost is not None:
            self.on_lost(lost)

    def _stop_extender(self) -> None:
        heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is not None:
            heartbeat.stop()
            if heartbeat.lost and self._lost is None:
                self._lost = self._loss("was lost while held")
            if heartbeat.deadline is not None:
                self._deadline = heartbeat.deadline

    def __enter__(self) -> Semaphore:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

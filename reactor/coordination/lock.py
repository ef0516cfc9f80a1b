"""The lock client: owner-tokened, re-entrant, auto-extended, fenced (``docs/coordination.md``).

:class:`Lock` wraps :class:`reactor.ports.LockStore` with what a holder needs: waiting with a
jittered backoff, auto-extension every ``ttl/3`` under the shared renewal policy
(:mod:`reactor.model.coordination.renewal`), ``detach``/``reattach`` for contention parks, the
fencing token of the hold (:attr:`Lock.token`), and loss reporting: :attr:`Lock.lost` becomes a
:class:`reactor.LockLost` — and ``on_lost`` fires — when an extend answers ``False`` or the
holder's deadline passes without a successful extend ("Renewal and loss").
"""

from __future__ import annotations

import logging
import math
import random
import uuid
from collections.abc import Callable
from types import TracebackType

from reactor.coordination.heartbeat import Heartbeat
from reactor.errors import LockAcquisitionError, LockLost
from reactor.model.coordination.renewal import (
    holder_lease,
    poll_delay,
    renew_interval,
    validate_lease,
)
from reactor.ports.clock import Clock, monotonic_reader, sleeper
from reactor.ports.storage import LockStore

#: This module's own random stream for jitter: library code never draws from the global
#: ``random`` state (a user's seeded stream, property-based tests replaying theirs).
_RANDOM = random.Random()

__all__ = ["Lock"]

log = logging.getLogger("reactor.coordination")


class Lock:
    """A handle on one lock key for one owner.

    Args:
        store: the lock sub-store.
        key: the lock key.
        owner: the owner token; a fresh UUID when omitted. Executions of one tree share an
            owner so nested reactors re-enter instead of deadlocking.
        ttl: seconds until the lock lapses unless extended; ``None`` = never. With
            ``auto_extend`` at least :data:`~reactor.model.coordination.renewal.MIN_LEASE`.
        wait: seconds :meth:`acquire` keeps trying a held lock (0 = a single try).
        auto_extend: extend the lock every ``ttl/3`` seconds from the shared heartbeat
            scheduler while held.
        on_lost: called (from a scheduler thread) with a :class:`LockLost` when the hold is
            lost: an extend answered ``False`` or the deadline passed without a successful
            extend. The holder should stop relying on the lock.
        sleep: the wait between two tries of :meth:`acquire` (seconds); default ``clock``'s
            ``sleep``.
        monotonic: the clock of the holder's deadline, which the renewal keeps in real time;
            default the system's monotonic clock, read at call time. Without ``clock`` it is
            also the clock of the ``wait`` bound.
        clock: the :class:`~reactor.ports.Clock` :meth:`acquire` waits on (its pauses and its
            ``wait`` bound); default the system clock. The engine passes the runtime's
            (docs/testing.md, "The clock").
        skew: the storage's clock-skew budget in seconds (``Capabilities.clock_skew``): the
            holder's deadline is ``holder_lease(ttl, skew)`` (``ttl - skew`` less a small
            rounding margin) after an acquire or extend started, because a
            process whose clock runs ahead may take a lapsed lock that much early.

    Attributes:
        token: the fencing token of the current hold (``0`` when not held): every fresh
            acquisition of a key gets a token greater than any earlier one
            (``docs/coordination.md``, "Fencing tokens"). Pass it to the resource you protect.

    Raises:
        ValueError: ``ttl`` is not positive, is below the minimum lease with ``auto_extend``,
            does not exceed ``skew``, or ``wait`` is negative.
    """

    def __init__(
        self,
        store: LockStore,
        key: str,
        *,
        owner: str | None = None,
        ttl: float | None = 60.0,
        wait: float = 0.0,
        auto_extend: bool = True,
        on_lost: Callable[[LockLost], None] | None = None,
        sleep: Callable[[float], None] | None = None,
        monotonic: Callable[[], float] | None = None,
        skew: float = 0.0,
        clock: Clock | None = None,
    ) -> None:
        if ttl is not None and (
            isinstance(ttl, bool) or not isinstance(ttl, int | float)
            or not (ttl > 0 and math.isfinite(ttl))
        ):
            raise ValueError(
                f"Lock ttl must be a finite number of seconds > 0 or None, got {ttl!r}"
            )
        if ttl is not None and auto_extend:
            validate_lease("Lock ttl (auto-extended)", ttl)
        if ttl is not None and holder_lease(ttl, skew) <= 0:
            raise ValueError(
                f"Lock ttl ({ttl:g}s) must exceed the storage's clock-skew budget ({skew:g}s)"
            )
        if wait < 0:
            raise ValueError(f"Lock wait must be >= 0 seconds, got {wait!r}")
        self.store = store
        self.key = key
        self.owner = owner or str(uuid.uuid4())
        self.ttl = ttl
        self.wait = wait
        self.auto_extend = auto_extend and ttl is not None
        self.on_lost = on_lost
        self.token = 0
        self.skew = skew
        self._lost: LockLost | None = None
        self._deadline: float | None = None  # the holder's deadline while not auto-extended
        self._sleep = sleep if sleep is not None else sleeper(clock)
        self._monotonic = monotonic_reader(monotonic)
        self._wait_monotonic = clock.monotonic if clock is not None else self._monotonic
        self._heartbeat: Heartbeat | None = None

    @property
    def lost(self) -> LockLost | None:
        """The :class:`LockLost` of a hold that is gone (``None`` while held or never taken).

        Cheap (no I/O): checks the recorded loss and the holder's deadline.
        """
        if self._lost is None:
            heartbeat = self._heartbeat
            if heartbeat is not None and heartbeat.expired():
                self._lost = self._loss(refused=heartbeat.refused)
            elif heartbeat is None and self._deadline is not None and (
                self._monotonic() >= self._deadline
            ):
                self._lost = self._loss(refused=False)
        return self._lost

    def _loss(self, *, refused: bool) -> LockLost:
        if refused:
            why = "an extend was refused: it lapsed in the store or another owner took it"
        else:
            why = f"its {self.ttl:g}s lease passed without a successful extend"
        return LockLost(f"lock {self.key!r} lost: {why}", key=self.key)

    def try_acquire(self) -> bool:
        """Take (or re-enter) the lock once; start the extender on success.

        Returns:
            ``True`` when held (:attr:`token` is then the hold's fencing token).

        Raises:
            StorageError: the backend failed.
        """
        started = self._monotonic()
        granted = self.store.acquire(self.key, self.owner, self.ttl)
        if not granted:
            return False
        self.token = int(granted)
        self._lost = None
        self._deadline = None if self.ttl is None else started + holder_lease(self.ttl, self.skew)
        self._start_extender(started)
        return True

    def monotonic(self) -> float:
        """The holder's clock (seconds): read it right before a request that may grant the
        lock, and pass the reading to :meth:`adopt`."""
        return self._monotonic()

    def adopt(self, token: int, started: float) -> None:
        """Hold the lock as granted by another request than :meth:`try_acquire` (a context
        store that took it together with a record: docs/protocol.md, "Optional fast paths"),
        exactly as a successful :meth:`try_acquire` started at ``started`` would; starts the
        extender.

        Args:
            token: the fencing token the request returned (>= 1).
            started: :meth:`monotonic` read before the request was sent.

        Raises:
            ValueError: ``token`` is below 1.
        """
        if token < 1:
            raise ValueError(f"an adopted lock's token is >= 1, got {token!r}")
        self.token = int(token)
        self._lost = None
        self._deadline = (
            None if self.ttl is None else started + holder_lease(self.ttl, self.skew)
        )
        self._start_extender(started)

    def released_elsewhere(self) -> None:
        """Stop the extender of a hold another request released (a context store's final
        write that released it: docs/protocol.md, "Optional fast paths"); nothing is sent."""
        self._stop_extender()
        self._deadline = None

    def acquire(self) -> Lock:
        """Take the lock, retrying with a jittered backoff for up to ``wait`` seconds.

        Returns:
            ``self``, for chaining.

        Raises:
            LockAcquisitionError: still held by another owner at the deadline.
            StorageError: the backend failed.
        """
        deadline = self._wait_monotonic() + self.wait
        attempt = 0
        while True:
            if self.try_acquire():
                return self
            remaining = deadline - self._wait_monotonic()
            if remaining <= 0:
                holder = self.store.info(self.key)
                raise LockAcquisitionError(
                    f"lock {self.key!r} is held by another owner"
                    + (f" ({holder.owner})" if holder else ""),
                    key=self.key,
                )
            attempt += 1
            self._sleep(poll_delay(attempt, remaining, _RANDOM.uniform(0.5, 1.0)))

    def release(self) -> bool:
        """Stop the extender and release one level of the lock.

        Returns:
            ``False`` when the lock had already lapsed or changed hands (logged as
            ``event=release_refused``: the holder lost mutual exclusion at some point).

        Raises:
            StorageError: the backend failed.
        """
        self._stop_extender()
        released = self.store.release(self.key, self.owner)
        if not released:
            log.warning("event=release_refused primitive=lock key=%s owner=%s", self.key,
                        self.owner)
            if self._lost is None:
                self._lost = LockLost(
                    f"lock {self.key!r} lost: no longer held by this owner at release",
                    key=self.key,
                )
        self._deadline = None
        return released

    def extend(self, ttl: float | None = None) -> bool:
        """Set the remaining TTL to ``ttl`` (default: the lock's TTL).

        Returns:
            ``False`` when not held by this owner.

        Raises:
            StorageError: the backend failed.
        """
        ttl = self.ttl if ttl is None else ttl
        started = self._monotonic()
        extended = self.store.extend(self.key, self.owner, ttl)
        if extended and self._heartbeat is None:
            self._deadline = None if ttl is None else started + holder_lease(ttl, self.skew)
        return extended

    def change_ttl(self, ttl: float) -> bool:
        """Hold the lock with leases of ``ttl`` seconds from now on: the remaining TTL is set to
        ``ttl`` at once and an auto-extended hold is renewed every ``ttl/3`` (a worker's run
        lease that ends with a step's heartbeat limit: docs/concepts.md, "Heartbeats").

        Args:
            ttl: the new lease, in seconds: finite and > 0, at least
                :data:`~reactor.model.coordination.renewal.MIN_LEASE` when auto-extended, and
                above the storage's clock-skew budget.

        Returns:
            ``False`` when this owner no longer holds the lock (nothing changed; :attr:`lost`
            reports it); ``True`` when held with the new lease.

        Raises:
            ValueError: ``ttl`` is not a valid lease (as for the constructor's ``ttl``).
            StorageError: the backend failed (the hold goes on with its old lease).
        """
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not (
            ttl > 0 and math.isfinite(ttl)
        ):
            raise ValueError(f"Lock ttl must be a finite number of seconds > 0, got {ttl!r}")
        if self.auto_extend:
            validate_lease("Lock ttl (auto-extended)", ttl)
        if holder_lease(ttl, self.skew) <= 0:
            raise ValueError(
                f"Lock ttl ({ttl:g}s) must exceed the storage's clock-skew budget "
                f"({self.skew:g}s)"
            )
        extending = self._heartbeat is not None
        self._stop_extender()
        started = self._monotonic()
        try:
            extended = self.store.extend(self.key, self.owner, ttl)
        except Exception:
            if extending and self._deadline is not None and self.ttl is not None:
                # the old lease goes on from its last successful renewal
                self._start_extender(self._deadline - holder_lease(self.ttl, self.skew))
            raise
        if not extended:
            if self._lost is None:
                self._lost = self._loss(refused=True)
            return False
        self.ttl = float(ttl)
        self._deadline = started + holder_lease(self.ttl, self.skew)
        if extending:
            self._start_extender(started)
        return True

    def detach(self) -> None:
        """Stop auto-extending but keep the lock held (a park keeps ownership up to the TTL)."""
        self._stop_extender()

    def reattach(self) -> bool:
        """Re-adopt a detached hold without bumping the re-entrancy count.

        Returns:
            ``True`` when still owned (the extender restarts; :attr:`token` is read back);
            ``False`` when the hold lapsed and the caller must acquire afresh.

        Raises:
            StorageError: the backend failed.
        """
        started = self._monotonic()
        if self.extend():
            self._lost = None
            info = self.store.info(self.key)
            if info is not None and info.owner == self.owner:
                self.token = int(getattr(info, "token", 0) or self.token)
            self._start_extender(started)
            return True
        return False

    def held_by_me(self) -> bool:
        """Whether this owner holds the lock right now (one read).

        Raises:
            StorageError: the backend failed.
        """
        info = self.store.info(self.key)
        return info is not None and info.owner == self.owner

    def _start_extender(self, acquired_at: float) -> None:
        if not self.auto_extend or self._heartbeat is not None or self.ttl is None:
            return
        lease = holder_lease(self.ttl, self.skew)  # docs/coordination.md#clock-skew
        self._heartbeat = Heartbeat(
            f"lock-extend:{self.key}", renew_interval(lease), self.extend, self._report_lost,
            lease=lease, clock=self._monotonic,
        ).start(acquired_at)

    def _report_lost(self) -> None:
        lost = self.lost or self._loss(refused=True)
        self._lost = lost
        if self.on_lost is not None:
            self.on_lost(lost)

    def _stop_extender(self) -> None:
        heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is not None:
            heartbeat.stop()
            if heartbeat.lost and self._lost is None:
                self._lost = self._loss(refused=heartbeat.refused)
            if self.ttl is not None and heartbeat.deadline is not None:
                self._deadline = heartbeat.deadline

    def __enter__(self) -> Lock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

"""The lock client: owner-tokened, re-entrant, auto-extended (storage-protocol.md §2.8).

:class:`Lock` wraps :class:`reactor.ports.LockStore` with what a holder needs: waiting with
polling, an auto-extend thread every ``ttl/3`` (at least 1 s), ``detach``/``reattach`` for
contention parks, and a :class:`reactor.LockLost` report when an extend fails so the holder
learns it lost mutual exclusion.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from types import TracebackType

from reactor.coordination._heartbeat import Heartbeat
from reactor.model.errors import LockAcquisitionError, LockLost
from reactor.ports.storage import LockStore

__all__ = ["Lock"]

#: Polling interval while waiting for a held lock, in seconds (ruby_reactor: 100 ms).
POLL_INTERVAL = 0.1


class Lock:
    """A handle on one lock key for one owner.

    Args:
        store: the lock sub-store.
        key: the lock key.
        owner: the owner token; a fresh UUID when omitted. Executions of one tree share an
            owner so nested reactors re-enter instead of deadlocking.
        ttl: seconds until the lock lapses unless extended; ``None`` = never.
        wait: seconds :meth:`acquire` keeps polling a held lock (0 = a single try).
        auto_extend: run a daemon thread that extends the lock every ``max(ttl/3, 1)`` seconds.
        on_lost: called (from the extender thread) with a :class:`LockLost` when an extend
            fails; the holder should stop relying on the lock.
        sleep: the sleep function used while polling (injectable for tests).
        monotonic: the clock used for the wait deadline (injectable for tests).
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
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl is not None and ttl <= 0:
            raise ValueError(f"Lock ttl must be > 0 seconds or None, got {ttl!r}")
        if wait < 0:
            raise ValueError(f"Lock wait must be >= 0 seconds, got {wait!r}")
        self.store = store
        self.key = key
        self.owner = owner or str(uuid.uuid4())
        self.ttl = ttl
        self.wait = wait
        self.auto_extend = auto_extend and ttl is not None
        self.on_lost = on_lost
        self.lost: LockLost | None = None
        self._sleep = sleep
        self._monotonic = monotonic
        self._heartbeat: Heartbeat | None = None

    def try_acquire(self) -> bool:
        """Take (or re-enter) the lock once; start the extender on success."""
        if self.store.acquire(self.key, self.owner, self.ttl):
            self.lost = None
            self._start_extender()
            return True
        return False

    def acquire(self) -> Lock:
        """Take the lock, polling every 100 ms for up to ``wait`` seconds.

        Returns:
            ``self``, for chaining.

        Raises:
            LockAcquisitionError: still held by another owner at the deadline.
        """
        deadline = self._monotonic() + self.wait
        while True:
            if self.try_acquire():
                return self
            remaining = deadline - self._monotonic()
            if remaining <= 0:
                holder = self.store.info(self.key)
                raise LockAcquisitionError(
                    f"lock {self.key!r} is held by another owner"
                    + (f" ({holder.owner})" if holder else ""),
                    key=self.key,
                )
            self._sleep(min(POLL_INTERVAL, remaining))

    def release(self) -> bool:
        """Stop the extender and release one level of the lock.

        Returns:
            ``False`` when the lock had already lapsed or changed hands.
        """
        self._stop_extender()
        return self.store.release(self.key, self.owner)

    def extend(self, ttl: float | None = None) -> bool:
        """Set the remaining TTL to ``ttl`` (default: the lock's TTL); ``False`` when not held."""
        return self.store.extend(self.key, self.owner, self.ttl if ttl is None else ttl)

    def detach(self) -> None:
        """Stop auto-extending but keep the lock held (a park keeps ownership up to the TTL)."""
        self._stop_extender()

    def reattach(self) -> bool:
        """Re-adopt a detached hold without bumping the re-entrancy count.

        Returns:
            ``True`` when still owned (the extender restarts); ``False`` when the hold lapsed
            and the caller must acquire afresh.
        """
        if self.extend():
            self._start_extender()
            return True
        return False

    def held_by_me(self) -> bool:
        """Whether this owner holds the lock right now."""
        info = self.store.info(self.key)
        return info is not None and info.owner == self.owner

    def _start_extender(self) -> None:
        if not self.auto_extend or self._heartbeat is not None or self.ttl is None:
            return
        self._heartbeat = Heartbeat(
            f"lock-extend:{self.key}", max(self.ttl / 3.0, 1.0), self.extend, self._report_lost
        ).start()

    def _report_lost(self) -> None:
        self.lost = LockLost(f"lock {self.key!r} lapsed and could not be extended")
        if self.on_lost is not None:
            self.on_lost(self.lost)

    def _stop_extender(self) -> None:
        heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is not None:
            heartbeat.stop()

    def __enter__(self) -> Lock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

"""The semaphore client: one lease per holder, auto-extended (ARCHITECTURE §4).

A dead holder stops extending and its lease lapses, so capacity is never leaked (the fix for the
slot leaks reported against Prefect, Kestra, Redisson and ruby_reactor's token lists).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from types import TracebackType

from reactor.coordination._heartbeat import Heartbeat
from reactor.model.errors import SemaphoreAcquisitionError
from reactor.ports.storage import SemaphoreStore

__all__ = ["Semaphore"]

#: Polling interval while waiting for a free slot, in seconds (the SQL adapter's 50 ms).
POLL_INTERVAL = 0.05


class Semaphore:
    """A handle on one counting semaphore for one holder.

    Args:
        store: the semaphore sub-store.
        key: the semaphore key.
        limit: the maximum number of concurrent holders (>= 1).
        holder: the holder token; a fresh UUID when omitted (a parked unit passes its saved
            token to re-adopt its slot).
        lease: seconds a slot stays leased without an extend (default 60).
        wait: seconds :meth:`acquire` keeps polling when full (0 = a single try).
        auto_extend: extend the lease every ``max(lease/3, 1)`` seconds from a daemon thread.
        sleep: injectable sleep for polling.
        monotonic: injectable clock for the wait deadline.
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
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit < 1:
            raise ValueError(f"Semaphore limit must be >= 1, got {limit!r}")
        if lease <= 0:
            raise ValueError(f"Semaphore lease must be > 0 seconds, got {lease!r}")
        if wait < 0:
            raise ValueError(f"Semaphore wait must be >= 0 seconds, got {wait!r}")
        self.store = store
        self.key = key
        self.limit = limit
        self.holder = holder or str(uuid.uuid4())
        self.lease = lease
        self.wait = wait
        self.auto_extend = auto_extend
        self._sleep = sleep
        self._monotonic = monotonic
        self._heartbeat: Heartbeat | None = None

    def try_acquire(self) -> bool:
        """Lease a slot once; start the extender on success."""
        if self.store.acquire(self.key, self.holder, self.limit, self.lease):
            self._start_extender()
            return True
        return False

    def acquire(self) -> Semaphore:
        """Lease a slot, polling for up to ``wait`` seconds.

        Raises:
            SemaphoreAcquisitionError: every slot is leased at the deadline.
        """
        deadline = self._monotonic() + self.wait
        while True:
            if self.try_acquire():
                return self
            remaining = deadline - self._monotonic()
            if remaining <= 0:
                raise SemaphoreAcquisitionError(
                    f"semaphore {self.key!r} has all {self.limit} slots leased", key=self.key
                )
            self._sleep(min(POLL_INTERVAL, remaining))

    def release(self) -> bool:
        """Stop the extender and give the slot back; ``False`` when the lease had lapsed."""
        self._stop_extender()
        return self.store.release(self.key, self.holder)

    def detach(self) -> None:
        """Stop extending but keep the lease (a park keeps the slot up to the lease)."""
        self._stop_extender()

    def reattach(self) -> bool:
        """Re-adopt a detached lease; ``False`` when it lapsed (acquire afresh)."""
        if self.store.extend(self.key, self.holder, self.lease):
            self._start_extender()
            return True
        return False

    def _start_extender(self) -> None:
        if not self.auto_extend or self._heartbeat is not None:
            return
        self._heartbeat = Heartbeat(
            f"semaphore-extend:{self.key}",
            max(self.lease / 3.0, 1.0),
            lambda: self.store.extend(self.key, self.holder, self.lease),
        ).start()

    def _stop_extender(self) -> None:
        heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is not None:
            heartbeat.stop()

    def __enter__(self) -> Semaphore:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

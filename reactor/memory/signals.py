"""In-process best-effort pub/sub (docs/protocol.md#signals).

Each :meth:`MemorySignalStore.subscribe` creates a :class:`MemorySubscription` with its own
:class:`queue.Queue`; :meth:`MemorySignalStore.publish` puts the message on the queue of every
subscription open on the channel at that moment. Messages published before a subscription
exists are not delivered (at most once, unpersisted, never load-bearing: waiters always
re-check the durable record).
"""

from __future__ import annotations

import queue
import threading

__all__ = ["MemorySignalStore", "MemorySubscription"]


class MemorySubscription:
    """A live subscription to one channel of a :class:`MemorySignalStore`.

    Implements :class:`reactor.ports.Subscription`.
    """

    def __init__(self, store: MemorySignalStore, channel: str) -> None:
        self._store = store
        self.channel = channel
        self._queue: queue.Queue[str] = queue.Queue()
        self._closed = False

    def get(self, timeout: float) -> str | None:
        """Wait up to ``timeout`` seconds for the next message; ``None`` on timeout or closed.

        A ``timeout`` of 0 (or less) only takes a message that is already waiting.
        """
        if self._closed:
            return None
        try:
            if timeout <= 0:
                return self._queue.get_nowait()
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        """Stop receiving; idempotent."""
        if not self._closed:
            self._closed = True
            self._store._unsubscribe(self)

    def _deliver(self, message: str) -> None:
        self._queue.put(message)


class MemorySignalStore:
    """A :class:`reactor.ports.SignalStore` for one process (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: dict[str, list[MemorySubscription]] = {}

    def publish(self, channel: str, message: str) -> None:
        """Deliver ``message`` to every open subscription of ``channel``; never raises."""
        with self._lock:
            targets = list(self._subscribers.get(channel, ()))
        for subscription in targets:
            subscription._deliver(message)

    def subscribe(self, channel: str) -> MemorySubscription:
        """Open a subscription; messages published from now on are delivered to it."""
        subscription = MemorySubscription(self, channel)
        with self._lock:
            self._subscribers.setdefault(channel, []).append(subscription)
        return subscription

    def subscriber_count(self, channel: str) -> int:
        """Open subscriptions on ``channel`` (tests and diagnostics)."""
        with self._lock:
            return len(self._subscribers.get(channel, ()))

    def _unsubscribe(self, subscription: MemorySubscription) -> None:
        with self._lock:
            subs = self._subscribers.get(subscription.channel)
            if subs is None:
                return
            subs[:] = [s for s in subs if s is not subscription]
            if not subs:
                del self._subscribers[subscription.channel]

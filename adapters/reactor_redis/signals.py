"""Best-effort completion signals on Redis pub/sub (docs/protocol.md#signals).

``publish`` is ``PUBLISH P:sig:<channel>``. Each :class:`RedisSubscription` holds a dedicated
connection (subscriber mode poisons a connection for other commands) and is confirmed by the
server before :meth:`RedisSignalStore.subscribe` returns, so a message published afterwards is
delivered. Signals only shorten waits: waiters always re-check the durable record.
"""

from __future__ import annotations

import time
import weakref
from typing import Any

from reactor.ports.driver_errors import close_quietly
from reactor_redis._base import Client, storage_errors
from reactor_redis.keys import Keys

__all__ = ["RedisSignalStore", "RedisSubscription"]


class RedisSubscription:
    """A live subscription to one channel (a :class:`reactor.ports.Subscription`).

    Args:
        pubsub: a redis-py ``PubSub`` already subscribed to the channel.
    """

    def __init__(self, pubsub: Any) -> None:
        self._pubsub = pubsub
        self._closed = False

    def get(self, timeout: float) -> str | None:
        """Wait up to ``timeout`` seconds for a message; ``None`` on timeout.

        Raises:
            StorageError: the connection failed.
        """
        deadline = time.monotonic() + max(timeout, 0.0)
        with storage_errors("signal get"):
            while not self._closed:
                remaining = deadline - time.monotonic()
                message = self._pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=max(remaining, 0.0)
                )
                if message is not None and message.get("type") in ("message", "smessage"):
                    data = message["data"]
                    return data if isinstance(data, str) else bytes(data).decode("utf-8")
                if remaining <= 0:
                    return None
        return None

    def close(self) -> None:
        """Unsubscribe and free the dedicated connection; idempotent."""
        if self._closed:
            return
        self._closed = True
        # Subscriber mode poisons a connection, so it is never worth returning to a pool:
        # disconnect it outright (a pooled ClusterPubSub connection otherwise lingers open).
        connection = getattr(self._pubsub, "connection", None)
        close_quietly(self._pubsub.unsubscribe, self._pubsub.close)
        if connection is not None:
            close_quietly(connection.disconnect)


class RedisSignalStore:
    """:class:`reactor.ports.SignalStore` on Redis pub/sub.

    Args:
        client: the shared redis-py client.
        keys: the key builder (channels are namespaced by the prefix).
    """

    def __init__(self, client: Client, keys: Keys) -> None:
        self._client = client
        self._keys = keys
        self._open: weakref.WeakSet[RedisSubscription] = weakref.WeakSet()

    def close_all(self) -> None:
        """Close every subscription still open (called by ``RedisStorage.close``)."""
        for subscription in list(self._open):
            subscription.close()

    def publish(self, channel: str, message: str) -> None:
        """Publish ``message``; never raises for a missing subscriber.

        Raises:
            StorageError: Redis failed.
        """
        with storage_errors("signal publish"):
            self._client.publish(self._keys.channel(channel), message)

    def subscribe(self, channel: str) -> RedisSubscription:
        """Start listening on ``channel`` (confirmed before returning).

        Raises:
            StorageError: Redis failed.
        """
        with storage_errors("signal subscribe"):
            pubsub = self._client.pubsub()
            pubsub.subscribe(self._keys.channel(channel))
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline:
                message = pubsub.get_message(timeout=0.5)
                if message is not None and message.get("type") == "subscribe":
                    break
        subscription = RedisSubscription(pubsub)
        self._open.add(subscription)
        return subscription

"""Best-effort completion signals on Redis pub/sub (docs/protocol.md#signals).

``publish`` is ``PUBLISH P:sig:<channel>``. Subscriber mode poisons a connection for other
commands, so subscriptions never use the command pool:

* **on a single server** every subscription of one storage shares one pub/sub connection
  (:class:`_Listener`), read by one daemon thread that hands each message to the
  subscriptions of its channel: a wait costs its ``SUBSCRIBE`` and ``UNSUBSCRIBE`` on that
  connection, never a new TCP connection (docs/workers.md, "Background runs");
* **on a cluster** each :class:`RedisSubscription` keeps a pub/sub of its own (redis-py's
  cluster pub/sub follows the channel's slot to its node).

Either way :meth:`RedisSignalStore.subscribe` returns once the server confirmed the
subscription, so a message published afterwards is delivered. Signals only shorten waits:
waiters always re-check the durable record, so a message lost to a reconnect costs a poll
interval, never a result.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
import weakref
from typing import Any

from redis.cluster import RedisCluster

from reactor.errors import StorageError
from reactor.ports.driver_errors import close_quietly
from reactor_redis._base import Client, storage_errors
from reactor_redis.keys import Keys

__all__ = ["RedisSignalStore", "RedisSubscription"]

log = logging.getLogger("reactor.redis")

#: Seconds a subscribe waits for the server's confirmation.
CONFIRM_TIMEOUT = 5.0
#: Seconds the listener thread blocks in one read (it also notices a close this often).
LISTEN_SLICE = 1.0


class RedisSubscription:
    """A live subscription to one channel (a :class:`reactor.ports.Subscription`).

    Args:
        pubsub: a redis-py ``PubSub`` of its own already subscribed to the channel (a
            cluster); ``None`` when the messages come from a shared :class:`_Listener`.
        listener: the shared listener, and the channel it delivers to this subscription.
    """

    def __init__(self, pubsub: Any, listener: _Listener | None = None, channel: str = "") -> None:
        self._pubsub = pubsub
        self._listener = listener
        self._channel = channel
        self._messages: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._closed = False

    def deliver(self, message: str) -> None:
        """Hand this subscription one message (called by the listener thread)."""
        self._messages.put(message)

    def get(self, timeout: float) -> str | None:
        """Wait up to ``timeout`` seconds for a message; ``None`` on timeout.

        Raises:
            StorageError: the connection failed (an own pub/sub only: a shared listener
                reconnects by itself, and its subscriptions then simply time out).
        """
        if self._pubsub is None:
            try:
                return self._messages.get(timeout=max(timeout, 0.0))
            except queue.Empty:
                return None
        deadline = time.monotonic() + max(timeout, 0.0)
        with storage_errors("signal get"):
            while not self._closed:
                remaining = deadline - time.monotonic()
                message = self._pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=max(remaining, 0.0)
                )
                if message is not None and message.get("type") in ("message", "smessage"):
                    return _text(message["data"])
                if remaining <= 0:
                    return None
        return None

    def close(self) -> None:
        """Unsubscribe (a shared listener's last subscriber of the channel sends
        ``UNSUBSCRIBE``; an own pub/sub disconnects its connection); idempotent, never
        raises."""
        if self._closed:
            return
        self._closed = True
        if self._listener is not None:
            self._listener.remove(self._channel, self)
            return
        # Subscriber mode poisons a connection, so it is never worth returning to a pool:
        # disconnect it outright (a pooled ClusterPubSub connection otherwise lingers open).
        connection = getattr(self._pubsub, "connection", None)
        close_quietly(self._pubsub.unsubscribe, self._pubsub.close)
        if connection is not None:
            close_quietly(connection.disconnect)


class _Listener:
    """One pub/sub connection shared by every subscription of a storage on a single server,
    read by one daemon thread started with the first subscription.

    ``subscribe`` sends ``SUBSCRIBE`` only for a channel nobody here listens to yet, and waits
    for the confirmation the thread reads; the last subscription of a channel to close sends
    ``UNSUBSCRIBE``. A read error (a dropped connection) is logged and retried: redis-py
    reconnects and subscribes again to every channel on the next read.

    Args:
        client: the storage's redis-py client.
    """

    def __init__(self, client: Any) -> None:
        self._pubsub = client.pubsub()
        self._lock = threading.Lock()
        self._channels: dict[str, set[RedisSubscription]] = {}
        self._confirmed: dict[str, threading.Event] = {}
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self.pid = os.getpid()

    def add(self, channel: str) -> RedisSubscription:
        """Subscribe to ``channel`` (``SUBSCRIBE`` when it is new here), confirmed.

        Raises:
            StorageError: Redis failed, or did not confirm within :data:`CONFIRM_TIMEOUT`.
        """
        subscription = RedisSubscription(None, self, channel)
        with self._lock:
            listeners = self._channels.setdefault(channel, set())
            first = not listeners
            listeners.add(subscription)
            if first:
                self._confirmed[channel] = threading.Event()
            confirmed = self._confirmed[channel]
            try:
                if first:
                    with storage_errors("signal subscribe"):
                        self._pubsub.subscribe(channel)
                    self._start()
            except BaseException:
                self._forget(channel, subscription)
                raise
        if not confirmed.wait(CONFIRM_TIMEOUT):
            subscription.close()
            raise StorageError(f"signal subscribe: Redis did not confirm channel {channel!r}")
        return subscription

    def remove(self, channel: str, subscription: RedisSubscription) -> None:
        """Drop ``subscription``; ``UNSUBSCRIBE`` when it was the channel's last (never
        raises: a failed unsubscribe leaves a channel nobody reads, dropped on reconnect)."""
        with self._lock:
            if self._forget(channel, subscription) and not self._closed.is_set():
                close_quietly(lambda: self._pubsub.unsubscribe(channel))

    def _forget(self, channel: str, subscription: RedisSubscription) -> bool:
        """Remove ``subscription`` (under the lock); whether its channel has none left."""
        listeners = self._channels.get(channel)
        if listeners is None:
            return False
        listeners.discard(subscription)
        if listeners:
            return False
        del self._channels[channel]
        self._confirmed.pop(channel, None)
        return True

    def close(self) -> None:
        """Stop the thread and close the connection; idempotent, never raises."""
        self._closed.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(LISTEN_SLICE * 2)
        connection = getattr(self._pubsub, "connection", None)
        close_quietly(self._pubsub.close)
        if connection is not None:
            close_quietly(connection.disconnect)

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="reactor-redis-signals", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while not self._closed.is_set():
            try:
                message = self._pubsub.get_message(timeout=LISTEN_SLICE)
            except Exception as exc:  # a dropped connection: redis-py reconnects next read
                if self._closed.is_set():
                    return
                log.warning("event=signal_listener_error error=%s", exc)
                self._closed.wait(0.1)
                continue
            if message is not None:
                self._dispatch(message)

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        channel = _text(message.get("channel", b""))
        with self._lock:
            if kind == "subscribe":
                event = self._confirmed.get(channel)
                if event is not None:
                    event.set()
                return
            if kind != "message":
                return
            listeners = list(self._channels.get(channel, ()))
        data = _text(message["data"])
        for subscription in listeners:
            subscription.deliver(data)


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
        self._listener: _Listener | None = None
        self._lock = threading.Lock()

    def close_all(self) -> None:
        """Close every subscription still open and the shared listener (called by
        ``RedisStorage.close``)."""
        for subscription in list(self._open):
            subscription.close()
        with self._lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()

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
        name = self._keys.channel(channel)
        if isinstance(self._client, RedisCluster):
            subscription = self._own_subscription(name)
        else:
            subscription = self._shared_listener().add(name)
        self._open.add(subscription)
        return subscription

    def _shared_listener(self) -> _Listener:
        """The storage's listener (a new one in a forked child: threads do not survive a
        fork, and the parent's connection is the parent's)."""
        with self._lock:
            listener = self._listener
            if listener is None or listener.pid != os.getpid():
                listener = self._listener = _Listener(self._client)
            return listener

    def _own_subscription(self, name: str) -> RedisSubscription:
        with storage_errors("signal subscribe"):
            pubsub = self._client.pubsub()
            pubsub.subscribe(name)
            deadline = time.monotonic() + CONFIRM_TIMEOUT
            while time.monotonic() < deadline:
                message = pubsub.get_message(timeout=0.5)
                if message is not None and message.get("type") == "subscribe":
                    break
        return RedisSubscription(pubsub)


def _text(data: Any) -> str:
    return data if isinstance(data, str) else bytes(data).decode("utf-8")

"""Best-effort completion signals on MongoDB change streams (storage-protocol.md §2.13).

``publish`` inserts ``{channel, message, at}`` into the ``<prefix>signals`` collection; each
:class:`MongoSubscription` is a change stream on that collection filtered to inserts of its
channel, opened before :meth:`MongoSignalStore.subscribe` returns, so a message published
afterwards is delivered. Signal documents are garbage: a TTL index on ``at`` removes them
(:data:`SIGNAL_RETENTION` seconds; best effort, a server without TTL indexes keeps them).

Change streams need a replica set or a server that emulates one (SecantusDB does); a
standalone ``mongod`` and mongomock do not. :func:`change_streams_supported` finds out once, at
construction, by opening and closing a stream; without support the storage declares
``Capabilities(signals=False)`` and waits fall back to polling the durable records
(ARCHITECTURE §5 rule 3: signals only ever shorten waits).
"""

from __future__ import annotations

import threading
import time
import weakref
from datetime import UTC, datetime
from typing import Any

from pymongo.errors import PyMongoError

from reactor.model.errors import StorageError

__all__ = [
    "SIGNALS",
    "SIGNAL_RETENTION",
    "MongoSignalStore",
    "MongoSubscription",
    "change_streams_supported",
]

#: The reactor collection holding published signals (``<prefix>signals`` in MongoDB).
SIGNALS = "signals"
#: Seconds a published signal document is kept (TTL index; clean-up only).
SIGNAL_RETENTION = 300
#: Longest single server-side wait of a subscription, in milliseconds (bounds ``get`` overrun
#: and how quickly ``close`` from another thread takes effect).
_MAX_AWAIT_MS = 100


def change_streams_supported(collection: Any) -> bool:
    """Whether ``collection`` can be watched: opens a change stream and closes it at once.

    Args:
        collection: a pymongo ``Collection`` (or an API-compatible fake).

    Returns:
        ``False`` when the server or fake refuses (standalone ``mongod``: ``OperationFailure``
        40573; mongomock: ``NotImplementedError``) or fails; ``True`` otherwise.
    """
    try:
        stream = collection.watch(max_await_time_ms=1)
    except (PyMongoError, NotImplementedError, AttributeError, TypeError):
        return False
    try:
        stream.close()
    except PyMongoError:
        pass
    return True


class MongoSubscription:
    """A live subscription to one channel (a :class:`reactor.ports.Subscription`).

    Args:
        stream: a pymongo ``ChangeStream`` of inserts on the signals collection, filtered to
            this channel and opened with a short ``max_await_time_ms``.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._closed = False
        self._lock = threading.Lock()

    def get(self, timeout: float) -> str | None:
        """Wait up to ``timeout`` seconds for the next message; ``None`` on timeout or close.

        Raises:
            StorageError: the change stream failed (not when it was closed meanwhile).
        """
        deadline = time.monotonic() + max(timeout, 0.0)
        while not self._closed:
            try:
                with self._lock:
                    change = None if self._closed else self._stream.try_next()
            except PyMongoError as exc:
                if self._closed:
                    return None
                raise StorageError(f"MongoDB signal wait failed: {exc}") from exc
            if change is not None:
                document = change.get("fullDocument") or {}
                return str(document.get("message", ""))
            if time.monotonic() >= deadline:
                return None
        return None

    def close(self) -> None:
        """Close the change stream; idempotent, never raises."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            try:
                self._stream.close()
            except Exception:  # closing must never raise
                pass


class MongoSignalStore:
    """:class:`reactor.ports.SignalStore` on a MongoDB collection and its change streams.

    Args:
        collection: the pymongo ``Collection`` of signal documents (``<prefix>signals``).
    """

    def __init__(self, collection: Any) -> None:
        self._collection = collection
        self._indexed = False
        self._open: weakref.WeakSet[MongoSubscription] = weakref.WeakSet()

    def _ensure_index(self) -> None:
        """Create the clean-up TTL index once (best effort: failures are ignored)."""
        if self._indexed:
            return
        self._indexed = True
        try:
            self._collection.create_index("at", expireAfterSeconds=SIGNAL_RETENTION)
        except PyMongoError:
            pass

    def publish(self, channel: str, message: str) -> None:
        """Insert one signal document; never raises for a missing subscriber.

        Raises:
            StorageError: MongoDB failed.
        """
        self._ensure_index()
        try:
            self._collection.insert_one(
                {"channel": channel, "message": message, "at": datetime.now(UTC)}
            )
        except PyMongoError as exc:
            raise StorageError(f"MongoDB signal publish failed: {exc}") from exc

    def subscribe(self, channel: str) -> MongoSubscription:
        """Open a change stream of ``channel``'s inserts (later publishes are delivered).

        Raises:
            StorageError: MongoDB refused or failed to open the stream.
        """
        pipeline = [{"$match": {"operationType": "insert", "fullDocument.channel": channel}}]
        try:
            stream = self._collection.watch(pipeline, max_await_time_ms=_MAX_AWAIT_MS)
        except PyMongoError as exc:
            raise StorageError(f"MongoDB signal subscribe failed: {exc}") from exc
        subscription = MongoSubscription(stream)
        self._open.add(subscription)
        return subscription

    def close_all(self) -> None:
        """Close every subscription still open (storage shutdown)."""
        for subscription in list(self._open):
            subscription.close()
